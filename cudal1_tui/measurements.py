"""What a result measured: medians, speedups, errors, the noise band.

Timing keys are the evaluator's: ``timing["reference"]`` (eager reference, timed beside the
candidate) and ``timing["candidate"]``. Results without both fall back to the stored
``speedup``.
"""

from __future__ import annotations

import math

from cudal1_evaluator.reward import noise_band
from cudal1_evaluator.schema import Result, TimingSummary

CANDIDATE_KEYS = ("candidate",)
REFERENCE_KEYS = ("reference",)


def positive(value: float | None) -> float | None:
    """The value when it is a finite positive time, else None (old or failed results)."""
    if isinstance(value, int | float) and math.isfinite(value) and value > 0:
        return float(value)
    return None


def median_ms(result: Result, keys: tuple[str, ...]) -> float | None:
    for key in keys:
        summary = result.timing.get(key)
        value = positive(summary.median_ms) if summary is not None else None
        if value is not None:
            return value
    return None


def candidate_ms(result: Result) -> float | None:
    return median_ms(result, CANDIDATE_KEYS)


def reference_ms(result: Result) -> float | None:
    return median_ms(result, REFERENCE_KEYS)


def speedup_from_result(result: Result) -> float | None:
    """reference median / candidate median, else the stored speedup; None when unknown."""
    ref, cand = reference_ms(result), candidate_ms(result)
    if ref is not None and cand is not None:
        return ref / cand
    stored = result.speedup
    return float(stored) if isinstance(stored, int | float) else None


def max_errors(result: Result) -> tuple[float, float]:
    """(max abs error, max rel error) over the correctness trials."""
    abs_err = max((float(t.max_abs_err) for t in result.trials), default=0.0)
    rel_err = max((float(t.max_rel_err) for t in result.trials), default=0.0)
    return abs_err, rel_err


def samples_ms(result: Result, key: str) -> list[float]:
    summary: TimingSummary | None = result.timing.get(key)
    raw = summary.samples_ms if summary is not None else []
    return [float(x) for x in raw if isinstance(x, int | float)] if isinstance(raw, list) else []


def noise_of(result: Result) -> float:
    """The band around 1x inside which this result's speedup is timing noise."""
    return noise_band(samples_ms(result, "reference"), samples_ms(result, "candidate"))
