"""How sure a speedup is: its interval, whether the timings were noisy, its precision.

One place for the CLI, the TUI and the exports. Inputs are the evaluator's results; those of
old traces lack newer fields (their defaults give None here, never an error).
Timing keys are the evaluator's: ``reference`` (eager, timed beside the candidate) and
``candidate``.
"""

from __future__ import annotations

import math
import os

from cudal1_evaluator.schema import Result, TimingSummary
from cudal1_tui.measurements import positive

# (p90 - p10) / median above this for either side: the machine was busy or the op too short.
NOISY_SPREAD = 0.10
# Before a speedup that is a lower bound (``Result.speedup_bound``).
BOUND_MARK = {"at_least": "≥"}




def speedup_interval(result: Result) -> tuple[float, float] | None:
    """The speedup's range from the two sample sets' p10/p90: (reference p10 / candidate
    p90, reference p90 / candidate p10). None when either side was not timed."""
    ref, cand = result.timing.get("reference"), result.timing.get("candidate")
    if ref is None or cand is None:
        return None
    ref_lo, ref_hi = positive(ref.p10_ms), positive(ref.p90_ms)
    cand_lo, cand_hi = positive(cand.p10_ms), positive(cand.p90_ms)
    if ref_lo is None or ref_hi is None or cand_lo is None or cand_hi is None:
        return None
    return ref_lo / cand_hi, ref_hi / cand_lo


def timing_spread(result: Result) -> float | None:
    """The larger relative spread of the reference and candidate samples."""
    spreads = []
    for key in ("reference", "candidate"):
        summary: TimingSummary | None = result.timing.get(key)
        value = summary.spread if summary is not None else None
        if isinstance(value, int | float) and math.isfinite(value):
            spreads.append(float(value))
    return max(spreads) if spreads else None


def noisy(result: Result, threshold: float = NOISY_SPREAD) -> bool:
    spread = timing_spread(result)
    return spread is not None and spread > threshold


def _figure(value: float) -> str:
    """Three significant figures at most: ``1.70``, ``12.3``, ``105``."""
    return f"{value:.2f}" if value < 10 else f"{value:.1f}" if value < 100 else f"{value:.0f}"


def interval_text(result: Result) -> str:
    """``1.70–1.95×`` (``12.1–14.3×`` above 10: it fits the table's column, ``×`` included),
    or "" when unknown."""
    interval = speedup_interval(result)
    return "" if interval is None else f"{_figure(interval[0])}–{_figure(interval[1])}×"


def noise_warning(result: Result) -> str:
    """A sentence when the timings were noisy, else ""."""
    spread = timing_spread(result)
    if spread is None or spread <= NOISY_SPREAD:
        return ""
    return (f"noisy timings: spread {spread:.0%} (above {NOISY_SPREAD:.0%}); the machine may be "
            "busy: re-run when it is idle before trusting this speedup")


def precision_text(result: Result, speedup: float | None) -> str:
    """``1.80× tf32 (1.10× strict fp32)`` when the candidate changed precision; else the plain
    speedup. Results written before precision parity carry neither field."""
    if speedup is None:
        return "—"
    text = BOUND_MARK.get(result.speedup_bound, "") + f"{speedup:.2f}×"
    candidate = result.precision.get("candidate")
    if isinstance(candidate, str) and candidate and candidate != "fp32":
        text += f" {candidate}"
    strict = result.speedup_strict
    if isinstance(strict, int | float) and math.isfinite(strict):
        text += f" ({strict:.2f}× strict fp32)"
    return text


def machine_busy(load: float | None = None, cores: int | None = None) -> str:
    """A sentence when the machine's load (1-minute average) exceeds its cores, else ""."""
    if load is None:
        try:
            load = os.getloadavg()[0]
        except OSError:  # not available on this platform
            return ""
    cores = cores or os.cpu_count() or 1
    if load <= cores:
        return ""
    return (f"the machine is busy (load {load:.1f} on {cores} cores): timings are noisier "
            "than usual")
