"""The parent's timing judgments from trusted windows (stdlib only).

A window is one runner's burst of N calls on N fresh input sets, timed by the parent's own
clock alone: it opens when the inputs become visible to the runner (its processes resumed,
the request sent) and closes when the trusted referee holds the outputs (its seal returned).
Nothing a runner reports enters a time. The reference runs through the identical path in a
sibling runner. A window's fixed hand-off, measured by the trusted side on the reference
runner's empty windows, is taken off; the rest per call is the sample (a runner can only add
to it). Speedups are ratios of medians of those means.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from cudal1_evaluator.schema import Flag, TimingSummary

SLOWED_P50 = 1.15  # reference_slowed (a warning): the interleaved median 15 % above alone
# Of a window's wall time, the hand-off taken off at most. What a runner of its own saves on
# its part of a window's fixed cost (delta: its worker's reply, 0.08-0.2 ms a window; on a GPU
# also work that outlives an early reply and runs during its readings) reads as a speedup of
# about 1 + M/(1-M) * delta/hand-off at best, in a window whose work is a quarter of the
# hand-off (fresh-eyes round 27): 0.8 paid four times what 0.5 does. It stays at 0.5 until
# the hand-off is small against a memory-bound problem's windows (Known limits).
HANDOFF_MOST = 0.5
ONCE_MOST_MS = 1.5  # a window's once cost taken off at most (0.5-1 ms measured on an H200)
ONCE_SHARE = 0.05  # of a candidate window's wall time, the once cost taken off at most
# one-sided 90 % quantiles of Student's t by degrees of freedom (then 1.3)
T90 = {1: 3.078, 2: 1.886, 3: 1.638, 4: 1.533, 5: 1.476, 6: 1.440, 7: 1.415, 8: 1.397}
SLOWED_CAP = 1.05  # the reference a speedup uses: at most 5 % slower than alone


@dataclass
class Burst:
    """One trusted window: how many calls it held, the parent's wall time around it, and the
    fixed hand-off of a window when it was taken (the median of the reference runner's empty
    windows: the signals, the requests, the seal's round trip)."""

    calls: int = 0
    wall_ms: float = 0.0
    handoff_ms: float = 0.0
    once_ms: float = 0.0  # the part of ``handoff_ms`` a window of calls pays once (``once_cost``)
    released_ms: float = 0.0  # its calls' hand-overs, each at most an honest one's (``release``)

    def mean_ms(self) -> float:
        """Per call, the hand-off taken off, the window's and its calls' (never more than
        ``HANDOFF_MOST`` of the window: a window that is mostly hand-off is sized wrong, what
        is left is an upper bound, and a runner of its own that hands over faster than ours
        earns no more than that)."""
        return max(self._left_ms(), self._floor_ms()) / max(1, self.calls)

    def at_floor(self) -> bool:
        """Whether what was taken off reached ``HANDOFF_MOST`` of a window of calls: its
        mean is then the floor, half its wall time a call, an upper bound of its calls' own
        time (fixed costs stay in it)."""
        return self.calls > 0 and self._left_ms() < self._floor_ms()

    def _left_ms(self) -> float:
        return self.wall_ms - (self.handoff_ms + self.released_ms)

    def _floor_ms(self) -> float:
        return (1.0 - HANDOFF_MOST) * self.wall_ms


def once_cost(calls: int, short: int, walls: list[tuple[float, float, float]]) -> float:
    """What a window of calls pays once beyond an empty window (the request naming its slots,
    the first launch, the last wait, the seal's reads), from the reference-alone phase: per
    iteration, the walls of a window of ``calls`` calls, of ``short`` calls (whose seal reads
    as many outputs as the full one's) and of none. The line through the first two meets zero
    calls at the fixed cost, less the empty window: one estimate an iteration. Taken as the
    one-sided 90 % lower bound of their mean, clamped to [0, ``ONCE_MOST_MS``]: where a slow
    reference's window noise (a few percent of a 90 ms window) swamps a cost under a
    millisecond, the bound is 0 and nothing is taken off."""
    if calls <= short or short < 1 or len(walls) < 2:
        return 0.0
    estimates = [(calls * part - short * full) / (calls - short) - empty
                 for full, part, empty in walls]
    n = len(estimates)
    bound = statistics.fmean(estimates) - \
        T90.get(n - 1, 1.3) * statistics.stdev(estimates) / math.sqrt(n)
    return min(max(0.0, bound), ONCE_MOST_MS)


def honest_fill_ms(fills: dict[int, list[float]], calls: int) -> float:
    """What filling ``calls`` sets costs a runner that runs nothing meanwhile: the median of
    the honest runners' fills of as many sets (the reference's, timed by the parent), else
    the line from their empty fills to their fills of the nearest number of sets; 0 with
    none yet (nothing is credited)."""
    if fills.get(calls):
        return statistics.median(fills[calls])
    known = [k for k in fills if k > 0 and fills[k]]
    if not known:
        return 0.0
    nearest = min(known, key=lambda k: (abs(k - calls), k))
    base = statistics.median(fills[0]) if fills.get(0) else 0.0
    return max(0.0, base + (statistics.median(fills[nearest]) - base) * calls / nearest)


def reading_pad_ms(took_ms: float, honest_ms: list[float]) -> float:
    """How long a candidate's reading at rest that took ``took_ms`` is held on the clock
    beyond it: up to what the reference's readings of the same kind take (their median, of
    the last ``READINGS_KEPT``). A reading sweeps every task of a runner, so it costs more
    for a runner of more tasks, and the reference's comes off both sides with the hand-off:
    a candidate of fewer tasks would gain the difference every window (round 25: 0.44 ms for
    1 task, 1.55 ms for 17). Padded, it pays what the reference pays; a longer one of its own
    stays its own."""
    if not honest_ms:
        return 0.0
    return max(0.0, statistics.median(honest_ms[-READINGS_KEPT:]) - took_ms)


READINGS_KEPT = 64


def at_floor(bursts: list[Burst]) -> tuple[int, int]:
    """How many of a side's windows of calls read their floor (``Burst.at_floor``), of how
    many."""
    windows = [b for b in bursts if b.calls > 0]
    return sum(b.at_floor() for b in windows), len(windows)


def means(bursts: list[Burst]) -> list[float]:
    return [b.mean_ms() for b in bursts if b.calls > 0]


def median_of(bursts: list[Burst]) -> float | None:
    values = means(bursts)
    return statistics.median(values) if values else None


def reference_means(alone: list[Burst], interleaved: list[Burst]) -> list[float]:
    """The reference's per-call samples a speedup is taken against: the reference interleaved
    with the candidate (like for like), capped at ``SLOWED_CAP`` times the reference alone
    (timed before the candidate was imported). Nothing a candidate does can make the
    reference faster; by leaving work behind (GPU kernels keep running while its processes
    are stopped) it can make it slower, and the cap bounds what that can earn."""
    inter = means(interleaved)
    alone_med = median_of(alone)
    if alone_med is None or not inter:
        return inter
    cap = SLOWED_CAP * alone_med
    if statistics.median(inter) <= cap:
        return inter
    scale = cap / statistics.median(inter)
    return [m * scale for m in inter]


def ratio(reference: list[float], candidate: list[float]) -> float | None:
    if not reference or not candidate:
        return None
    ref, cand = statistics.median(reference), statistics.median(candidate)
    return ref / cand if ref > 0 and cand > 0 else None


def reference_slowed(interleaved: TimingSummary, alone: TimingSummary) -> Flag | None:
    """A warning when the reference ran clearly slower next to the candidate than alone (its
    median 15 % above the alone one): something (the candidate's leftovers, a busy host)
    slowed it. The speedup never credits more than 5 % of such a slowdown in any case."""
    if interleaved.n == 0 or alone.n == 0 or alone.median_ms <= 0:
        return None
    if interleaved.median_ms <= SLOWED_P50 * alone.median_ms:
        return None
    slower = interleaved.median_ms / alone.median_ms
    return Flag("reference_slowed", f"the reference ran {slower:.2f}x slower next to the "
                f"candidate (median {interleaved.median_ms:.4g} ms a call) than alone "
                f"({alone.median_ms:.4g} ms): the speedup is taken against the reference "
                "alone, +5 % (something the candidate left running slows it, or the host was "
                "busy)",
                "warn")
