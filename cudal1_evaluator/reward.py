"""Reward formulas. Each is named and parameterised so traces can be re-scored.

A reward is 0 for anything whose status is not ``ok``. Formulas take the speedup
(reference time / candidate time) and return a float.

The reward policy (``RewardPolicy``, a job's ``reward.policy``) says what two kinds of
candidate that run correctly earn (docs/reward.md): one that returns a CUDA graph's static
output buffer (``static_outputs``: "zero" by default, the verdict is ``rejected``) and one
whose own kernel or build did not run so that its fallback computed the result
(``fallback``: "full" by default, the verdict is ``ok`` with a warning). Either way the
measured speedup stays in the result.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields

from cudal1_evaluator.stats import median_rel_ci

Formula = Callable[[float, Mapping[str, float]], float]


def _clipped_speedup(speedup: float, p: Mapping[str, float]) -> float:
    """speedup - 1 above the ``threshold`` (default 1.01, CUDA-L1's), clipped to ``max``."""
    if speedup < p.get("threshold", 1.01):
        return 0.0
    return min(speedup - 1.0, p.get("max", 10.0))


def _log_speedup(speedup: float, p: Mapping[str, float]) -> float:
    """log(speedup), clipped to [min, max]; slowdowns are negative."""
    value = math.log(max(speedup, 1e-9))
    return max(p.get("min", -1.0), min(value, p.get("max", math.log(100.0))))


def _binary(speedup: float, p: Mapping[str, float]) -> float:
    """1 when faster than ``threshold`` (default 1.01), else 0."""
    return 1.0 if speedup >= p.get("threshold", 1.01) else 0.0


def _raw_speedup(speedup: float, p: Mapping[str, float]) -> float:
    """The speedup itself, clipped to ``max`` (default 100)."""
    return min(speedup, p.get("max", 100.0))


FORMULAS: dict[str, Formula] = {
    "clipped_speedup": _clipped_speedup,
    "log_speedup": _log_speedup,
    "binary": _binary,
    "speedup": _raw_speedup,
}


@dataclass(frozen=True)
class Score:
    reward: float
    formula: str
    params: dict[str, float]
    within_noise: bool = False


def noise_band(reference_ms: Sequence[float], candidate_ms: Sequence[float]) -> float:
    """How far from 1 a speedup must be before it is more than timing noise.

    The two medians' ~95% confidence half-widths (relative) added: a speedup inside
    ``1 ± band`` cannot be told apart from the reference running against itself.
    Unknown (too few samples) counts as no band, so the formula alone decides.
    """
    band = median_rel_ci(reference_ms) + median_rel_ci(candidate_ms)
    return band if math.isfinite(band) else 0.0


def score(name: str, params: Mapping[str, float], status: str, speedup: float | None,
          *, noise: float = 0.0) -> Score:
    """The reward of one verdict. Unknown formula names raise KeyError with the known ones.

    A speedup within ``noise`` of 1 (see ``noise_band``) is scored as exactly 1: timing
    noise earns nothing, whatever the formula's threshold.
    """
    if name not in FORMULAS:
        raise KeyError(f"unknown reward formula {name!r}; known: {', '.join(sorted(FORMULAS))}")
    if status != "ok" or speedup is None or not math.isfinite(speedup) or speedup <= 0:
        return Score(0.0, name, dict(params))
    within = abs(speedup - 1.0) <= noise
    effective = 1.0 if within else speedup
    return Score(FORMULAS[name](effective, params), name, dict(params), within)


POLICY_CHOICES = ("zero", "full")


@dataclass(frozen=True)
class RewardPolicy:
    """What a correct candidate of each kind earns: "zero" (rejected, reward 0) or "full"
    (ok with a warning, the formula's reward)."""

    static_outputs: str = "zero"  # returns memory its next call overwrites or frees
    fallback: str = "full"  # its own kernel/build did not run; the fallback computed

    @classmethod
    def parse(cls, given: Mapping[str, object] | None) -> RewardPolicy:
        """From a job's ``reward.policy``; unknown keys or values raise ValueError."""
        given = dict(given or {})
        known = {f.name for f in fields(cls)}
        unknown = set(given) - known
        if unknown:
            raise ValueError(f"unknown reward policy key(s) {', '.join(sorted(unknown))}; "
                             f"known: {', '.join(sorted(known))}")
        for key, value in given.items():
            if value not in POLICY_CHOICES:
                raise ValueError(f"reward policy {key}={value!r}: use "
                                 f"{' or '.join(POLICY_CHOICES)}")
        return cls(**{k: str(v) for k, v in given.items()})

    def as_dict(self) -> dict[str, str]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


# the flags each policy key governs
POLICY_FLAGS = {"output_buffer_reused": "static_outputs", "fallback_taken": "fallback",
                "optional_build_failed": "fallback"}


def severity_under(policy: RewardPolicy, code: str) -> str | None:
    """The severity the policy gives a flag ("reject" or "warn"), None for flags it does
    not govern."""
    key = POLICY_FLAGS.get(code)
    if key is None:
        return None
    return "reject" if getattr(policy, key) == "zero" else "warn"


def describe(name: str) -> str:
    return (FORMULAS[name].__doc__ or name).strip()
