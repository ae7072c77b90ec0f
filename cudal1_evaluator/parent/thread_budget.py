"""One thread budget for every side (stdlib only): on a host, the reference is also timed
with as many intra-op threads as the candidate's calls were seen to use.

A candidate may run fewer threads than the reference (``torch.set_num_threads(1)`` at
import, or a single-threaded kernel of its own). On a host whose cores are taken by other
work, the reference's threads then stall at OpenMP barriers while the candidate's one
thread does not: an honest copy of the reference read 6.8-8.9x on a busy 2-core host
(round 29). What the candidate's process says about its thread count is never asked: the
parent reads how much CPU each runner's processes ran in each window (at rest, before and
after it, ``conduct._at_rest``), and a window's parallelism is that CPU time over its wall
time. When the candidate's is clearly below the threads the reference may use, a matched
reference runner is built with ``torch.set_num_threads`` at the candidate's count, and the
speedup is the lower of the two (as for precision parity, ``verdict._speedups``). On a quiet
host a reference held to fewer threads is no faster, and the speedup stays what it was.

A candidate that wants to look parallel must burn the CPU to show it, on the cores whose
contention it would gain from. Where torch runs one thread (``OMP_NUM_THREADS=1``) there is
nothing to match.
"""

from __future__ import annotations

import statistics

MARGIN = 0.25  # the candidate's parallelism this far below the reference's: matched
MOST_THREADS = 1024


def parallelism(cpu_ms: float | None, wall_ms: float) -> float | None:
    """Cores' worth of CPU a runner ran in a window (None without a reading)."""
    if cpu_ms is None or wall_ms <= 0:
        return None
    return max(0.0, cpu_ms) / wall_ms


def budget(candidate: list[float], reference_threads: int) -> int | None:
    """The intra-op threads to time the reference with as well: the candidate's windows'
    median parallelism, rounded, at least one; None when that is not clearly below the
    threads the reference runs with (``reference_threads``, torch's count in a trusted
    process on this host). Measured against the reference's allowance, not its observed
    parallelism: a candidate that spins decoy threads to look as parallel as a stalled
    reference would have to burn nearly every core the reference may use."""
    if not candidate or reference_threads <= 1:
        return None
    cand = statistics.median(candidate)
    threads = max(1, min(MOST_THREADS, round(cand)))
    if cand + MARGIN > reference_threads or threads >= reference_threads:
        return None
    return threads


def flag_reason(candidate: list[float], reference_threads: int, threads: int) -> str:
    cand = statistics.median(candidate)
    return (f"the candidate's calls ran on {cand:.2f} cores' worth of CPU (read by the "
            f"evaluator, not asked), the reference on up to {reference_threads} threads: the "
            f"reference was also timed with torch.set_num_threads({threads}), and the speedup "
            "is the lower of the two (fewer threads can only be faster where the cores are busy "
            "with other work)")
