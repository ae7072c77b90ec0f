"""What a result measured: medians, speedups, errors, the noise band.

Timing keys are the evaluator's: ``timing["reference"]`` (eager reference, timed beside the
candidate) and ``timing["candidate"]``. Results without both fall back to the stored
``speedup``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

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
    """The stored speedup (the one the reward was scored from), else reference median /
    candidate median (results that never stored one); None when unknown."""
    stored = positive(result.speedup)
    if stored is not None:
        return stored
    ref, cand = reference_ms(result), candidate_ms(result)
    return ref / cand if ref is not None and cand is not None else None


# The evaluator caps the reference beside the candidate at this factor of the reference
# timed alone (``cudal1_evaluator.parent.timing_checks.SLOWED_CAP``).
ALONE_CAP = 1.05
_SAME = 1e-9  # relative: a ratio that is the stored speedup, not a near miss


@dataclass(frozen=True)
class Basis:
    """The two times a speedup is the ratio of: ``reference_ms / candidate_ms == speedup``.

    ``kind`` says which reference it is: ``beside`` (timed interleaved with the candidate),
    ``alone +5 %`` (the evaluator capped a slowed reference), ``matched`` (the reference at
    the candidate's precision) or ``effective`` (a stored speedup no timing explains:
    speedup × candidate time)."""

    reference_ms: float
    candidate_ms: float
    kind: str

    @property
    def speedup(self) -> float:
        return self.reference_ms / self.candidate_ms


def _references(result: Result) -> list[tuple[str, float]]:
    found = []
    for key, kind, factor in (("reference", "beside", 1.0),
                              ("reference_matched", "matched", 1.0),
                              ("reference_pristine", "alone +5 %", ALONE_CAP),
                              ("reference_alone_sized", "alone +5 %", ALONE_CAP)):
        value = median_ms(result, (key,))
        if value is not None:
            found.append((kind, value * factor))
    return found


def basis(result: Result) -> Basis | None:
    """Which reference time the result's speedup divides by, and the candidate's time."""
    cand = candidate_ms(result)
    if cand is None:
        return None
    stored = positive(result.speedup)
    references = _references(result)
    if stored is None:
        return Basis(references[0][1], cand, "beside") if references else None
    for kind, ref in references:
        if abs(ref / cand - stored) <= _SAME * stored:
            return Basis(ref, cand, kind)
    return Basis(stored * cand, cand, "effective")


def time_text(ms: float) -> str:
    """A time as the basis line prints it: four significant digits, µs below 1 ms."""
    return f"{ms * 1000:.4g} µs" if ms < 1 else f"{ms:.4g} ms"


def basis_text(result: Result) -> str:
    """``reference 12.02 ms ÷ candidate 0.599 ms = 20.07×`` (the reference's kind in
    brackets unless it was timed beside the candidate); "" when the result has no times."""
    found = basis(result)
    if found is None:
        return ""
    kind = "" if found.kind == "beside" else f" ({found.kind})"
    return (f"reference {time_text(found.reference_ms)}{kind} ÷ candidate "
            f"{time_text(found.candidate_ms)} = {found.speedup:.2f}×")


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
