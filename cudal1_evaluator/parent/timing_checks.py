"""The parent's timing judgments from bursts (stdlib only).

A burst is one process's loop over B calls on B fresh input sets; the worker reports per-call
times, the parent brackets the burst with its own clock. The referee's bursts (same loop code)
calibrate what the loop costs outside the timed calls; a worker burst that costs clearly more
hid work there (``timing_unaccounted``), one whose reported calls add up to more than the wall
is forged (``timing_implausible``). Speedups use each burst's mean per call, so fusing the B
calls of a burst into one gains nothing.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from cudal1_evaluator.schema import Flag, TimingSummary
from cudal1_evaluator.stats import quantile

ALLOWANCE_FLOOR_MS = 0.05  # launch latency and a pipe message: 50 us per call at least
SLOWED_P50 = 1.15  # reference_slowed: interleaved p50 15% above the alone p50 ...
# ... and the interleaved p10 above the alone p90 (both must hold)


@dataclass
class Burst:
    times_ms: list[float] = field(default_factory=list)
    wall_ms: float = 0.0

    def overhead_ms(self) -> float:
        return (self.wall_ms - sum(self.times_ms)) / max(1, len(self.times_ms))

    def mean_ms(self) -> float:
        return sum(self.times_ms) / max(1, len(self.times_ms))


@dataclass
class Calibration:
    overhead_ms: float  # the referee's loop cost per call outside the timed call (median)
    allowance_ms: float  # how much more a worker burst may cost per call


def median_overhead_ms(bursts: list[Burst]) -> float | None:
    values = [b.overhead_ms() for b in bursts if b.times_ms]
    return statistics.median(values) if values else None


def calibrate(referee_bursts: list[Burst]) -> Calibration:
    """allowance = max(50 us, 3x the p10-p90 spread of the referee's overheads)."""
    values = sorted(b.overhead_ms() for b in referee_bursts if b.times_ms)
    if not values:
        return Calibration(0.0, ALLOWANCE_FLOOR_MS)
    median = statistics.median(values)
    spread = quantile(values, 0.9) - quantile(values, 0.1)
    return Calibration(median, max(ALLOWANCE_FLOOR_MS, 3 * spread))


def cross_check(worker_bursts: list[Burst], cal: Calibration) -> list[Flag]:
    flags: list[Flag] = []
    forged = [b for b in worker_bursts if sum(b.times_ms) > b.wall_ms * 1.01 + 0.02]
    if forged:
        b = forged[0]
        flags.append(Flag("timing_implausible", f"{len(forged)} candidate burst(s) report more "
                          f"time than the parent's wall clock saw ({sum(b.times_ms):.4g} ms "
                          f"reported in {b.wall_ms:.4g} ms)"))
    overhead = median_overhead_ms(worker_bursts)
    if overhead is not None:
        extra = overhead - cal.overhead_ms
        if extra > cal.allowance_ms:
            flags.append(Flag("timing_unaccounted", f"each candidate call cost {extra:.3g} ms "
                              f"more wall time outside its timed region than the reference's "
                              f"calls in the same loop (allowed {cal.allowance_ms:.3g} ms): "
                              "work hidden outside the timer (an untimed hand-off or copy?)"))
    return flags


def candidate_means(worker_bursts: list[Burst], cal: Calibration) -> list[float]:
    """Per burst, the mean per call: the reported one, or the wall-clock one less the
    referee's overhead and the allowance when that is larger (hidden work counts)."""
    means = []
    for b in worker_bursts:
        n = max(1, len(b.times_ms))
        walled = (b.wall_ms - n * (cal.overhead_ms + cal.allowance_ms)) / n
        means.append(max(b.mean_ms(), walled))
    return means


def reference_means(bursts: list[Burst]) -> list[float]:
    return [b.mean_ms() for b in bursts if b.times_ms]


def ratio(reference: list[float], candidate: list[float]) -> float | None:
    if not reference or not candidate:
        return None
    ref, cand = statistics.median(reference), statistics.median(candidate)
    return ref / cand if ref > 0 and cand > 0 else None


def reference_slowed(interleaved: TimingSummary, alone: TimingSummary) -> Flag | None:
    """The reference next to the candidate vs alone: p50 more than 15% above AND p10 above
    the alone p90 (a fixed cap on robust quantiles). A warning: the speedup is then taken
    against the reference alone, timed before the candidate was imported, so a slowed
    reference never inflates it, and a busy moment of the host rejects no honest kernel."""
    if interleaved.n == 0 or alone.n == 0 or alone.median_ms <= 0:
        return None
    if interleaved.median_ms <= SLOWED_P50 * alone.median_ms or \
            interleaved.p10_ms <= alone.p90_ms:
        return None
    slower = interleaved.median_ms / alone.median_ms
    return Flag("reference_slowed", f"the reference ran {slower:.2f}x "
                f"slower next to the candidate (p50 {interleaved.median_ms:.4g} ms, p10 "
                f"{interleaved.p10_ms:.4g} ms) than alone (p50 {alone.median_ms:.4g} ms, p90 "
                f"{alone.p90_ms:.4g} ms): the speedup is taken against the reference alone "
                "(something the candidate left running slows it, or the host was busy)", "warn")
