"""Read what a stored ``result`` (``cudal1_evaluator.Result.to_dict()``) measured.

Timing keys are the evaluator's: ``timing["reference"]`` (eager reference, timed beside the
candidate) and ``timing["candidate"]``. Results without both fall back to the stored
``speedup``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from cudal1_evaluator.reward import noise_band

CANDIDATE_KEYS = ("candidate",)
REFERENCE_KEYS = ("reference",)


def median_ms(result: Mapping[str, Any], keys: tuple[str, ...]) -> float | None:
    timing = result.get("timing") or {}
    if not isinstance(timing, Mapping):
        return None
    for key in keys:
        summary = timing.get(key)
        if isinstance(summary, Mapping):
            value = summary.get("median_ms")
            if isinstance(value, int | float) and math.isfinite(value) and value > 0:
                return float(value)
    return None


def candidate_ms(result: Mapping[str, Any]) -> float | None:
    return median_ms(result, CANDIDATE_KEYS)


def reference_ms(result: Mapping[str, Any]) -> float | None:
    return median_ms(result, REFERENCE_KEYS)


def speedup_from_result(result: Mapping[str, Any]) -> float | None:
    """reference median / candidate median, else the stored speedup; None when unknown."""
    ref, cand = reference_ms(result), candidate_ms(result)
    if ref is not None and cand is not None:
        return ref / cand
    stored = result.get("speedup")
    return float(stored) if isinstance(stored, int | float) else None


def max_errors(result: Mapping[str, Any]) -> tuple[float, float]:
    """(max abs error, max rel error) over the correctness trials."""
    trials = [t for t in result.get("trials") or [] if isinstance(t, Mapping)]
    abs_err = max((float(t.get("max_abs_err", 0.0)) for t in trials), default=0.0)
    rel_err = max((float(t.get("max_rel_err", 0.0)) for t in trials), default=0.0)
    return abs_err, rel_err


def flag_codes(result: Mapping[str, Any]) -> list[str]:
    return [str(f.get("code", "")) for f in result.get("flags") or [] if isinstance(f, Mapping)]


def samples_ms(result: Mapping[str, Any], key: str) -> list[float]:
    timing = result.get("timing") or {}
    summary = timing.get(key) if isinstance(timing, Mapping) else None
    raw = summary.get("samples_ms") if isinstance(summary, Mapping) else None
    return [float(x) for x in raw if isinstance(x, int | float)] if isinstance(raw, list) else []


def noise_of(result: Mapping[str, Any]) -> float:
    """The band around 1x inside which this result's speedup is timing noise."""
    return noise_band(samples_ms(result, "reference"), samples_ms(result, "candidate"))
