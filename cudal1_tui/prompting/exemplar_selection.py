"""Contrastive exemplar selection (CUDA-L1, arXiv 2507.14111).

Successful candidates are bucketed by score (fixed-width buckets of log-speedup);
distinct buckets are drawn with a softmax over (bucket mean - global mean) / tau,
one code from each, so the model sees variants of clearly different speed and
must explain the difference. The current best, the accepted candidate, the best
built-in strategy and a recent failure are added as the policy asks. Selection
is deterministic under a seed.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from cudal1_tui.config import Settings
from cudal1_tui.prompting.budget import fit_exemplars
from cudal1_tui.prompting.exemplar_items import (
    Exemplar,
    ExemplarCandidate,
    ExemplarRole,
    exemplar_refs,
)
from cudal1_tui.records import ExemplarRef

__all__ = [
    "Bucket",
    "Exemplar",
    "ExemplarCandidate",
    "Selection",
    "SelectionPolicy",
    "bucket_candidates",
    "bucket_probabilities",
    "exemplar_refs",
    "sample_buckets",
    "select_exemplars",
]


@dataclass(frozen=True)
class SelectionPolicy:
    contrast: int = 2  # distinct score buckets to draw (settings.exemplars)
    temperature: float = 0.5  # tau, in units of ln(speedup)
    bucket_width: float = 0.1  # ln(speedup) per bucket: about 10.5% apart
    include_best: bool = True
    include_accepted: bool = True
    include_builtin: bool = True  # the best built-in strategy: the easy win to beat
    include_failure: bool = True  # the most recent failure, with its error
    fill_same_bucket: bool = True  # too few buckets: take further codes from drawn ones

    @classmethod
    def from_settings(cls, settings: Settings) -> SelectionPolicy:
        return cls(contrast=max(0, settings.exemplars))


@dataclass
class Bucket:
    index: int  # floor(ln(speedup) / width)
    members: list[ExemplarCandidate] = field(default_factory=list)

    @property
    def mean(self) -> float:
        return sum(math.log(m.speedup or 1.0) for m in self.members) / len(self.members)


@dataclass
class Selection:
    exemplars: list[Exemplar]
    refs: list[ExemplarRef]


def bucket_candidates(candidates: Sequence[ExemplarCandidate], width: float) -> list[Bucket]:
    """Successful candidates grouped by log-speedup, slowest bucket first."""
    buckets: dict[int, Bucket] = {}
    for c in candidates:
        if c.ok:
            index = math.floor(math.log(c.speedup or 1.0) / width)
            buckets.setdefault(index, Bucket(index)).members.append(c)
    return [buckets[k] for k in sorted(buckets)]


def bucket_probabilities(buckets: Sequence[Bucket], temperature: float) -> list[float]:
    """Softmax over (bucket mean - global mean) / tau; global mean over all codes."""
    if not buckets:
        return []
    codes = [m for b in buckets for m in b.members]
    global_mean = sum(math.log(m.speedup or 1.0) for m in codes) / len(codes)
    tau = max(temperature, 1e-6)
    logits = [(b.mean - global_mean) / tau for b in buckets]
    top = max(logits)
    weights = [math.exp(x - top) for x in logits]
    total = sum(weights)
    return [w / total for w in weights]


def sample_buckets(
    buckets: Sequence[Bucket], k: int, temperature: float, rng: random.Random
) -> list[Bucket]:
    """Draw up to ``k`` distinct buckets, each draw a softmax over those left."""
    left = list(buckets)
    drawn: list[Bucket] = []
    while left and len(drawn) < k:
        probs = bucket_probabilities(left, temperature)
        pick = rng.choices(range(len(left)), weights=probs)[0]
        drawn.append(left.pop(pick))
    return drawn


def _contrasts(
    candidates: Sequence[ExemplarCandidate],
    policy: SelectionPolicy,
    rng: random.Random,
    taken: set[str],
) -> list[ExemplarCandidate]:
    """Codes from distinct buckets, among those not already shown in another role."""
    pool = [c for c in candidates if c.record_id not in taken]
    buckets = bucket_candidates(pool, policy.bucket_width)
    drawn = sample_buckets(buckets, policy.contrast, policy.temperature, rng)
    picked = [rng.choice(b.members) for b in drawn]
    if policy.fill_same_bucket:
        spare = [m for b in drawn for m in b.members if m not in picked]
        rng.shuffle(spare)
        picked.extend(spare[: max(0, policy.contrast - len(picked))])
    return picked


def _best(candidates: Sequence[ExemplarCandidate]) -> ExemplarCandidate | None:
    ok = [c for c in candidates if c.ok]
    return max(ok, key=lambda c: c.speedup or 0.0) if ok else None


def _accepted(candidates: Sequence[ExemplarCandidate]) -> ExemplarCandidate | None:
    accepted = [c for c in candidates if c.decision == "accepted"]
    return accepted[-1] if accepted else None


def _best_builtin(candidates: Sequence[ExemplarCandidate]) -> ExemplarCandidate | None:
    return _best([c for c in candidates if c.builtin])


def _recent_failure(candidates: Sequence[ExemplarCandidate]) -> ExemplarCandidate | None:
    failures = [c for c in candidates if c.status != "ok"]
    with_code = [c for c in failures if c.code.strip()]
    pool = with_code or failures
    return pool[-1] if pool else None


def _ordered(chosen: dict[str, tuple[ExemplarCandidate, ExemplarRole]]) -> list[Exemplar]:
    """Successful ones fastest first, then failures."""
    items = [Exemplar.of(c, role) for c, role in chosen.values()]
    ok = sorted((e for e in items if e.status == "ok"), key=lambda e: -(e.speedup or 0.0))
    return ok + [e for e in items if e.status != "ok"]


def select_exemplars(
    candidates: Sequence[ExemplarCandidate],
    *,
    policy: SelectionPolicy | None = None,
    seed: int = 0,
    budget_tokens: int | None = None,
) -> Selection:
    """Pick the exemplars for the next prompt from the session's candidates (oldest first)."""
    policy = policy or SelectionPolicy()
    rng = random.Random(seed)
    chosen: dict[str, tuple[ExemplarCandidate, ExemplarRole]] = {}

    def add(candidate: ExemplarCandidate | None, role: ExemplarRole, enabled: bool) -> None:
        if enabled and candidate is not None and candidate.record_id not in chosen:
            chosen[candidate.record_id] = (candidate, role)

    # Roles that say more than "contrast" claim a record first.
    add(_best(candidates), "best", policy.include_best)
    add(_accepted(candidates), "accepted", policy.include_accepted)
    for c in _contrasts(candidates, policy, rng, set(chosen)):
        add(c, "builtin" if c.builtin else "contrast", True)
    add(_best_builtin(candidates), "builtin", policy.include_builtin)
    add(_recent_failure(candidates), "failure", policy.include_failure)
    exemplars = _ordered(chosen)
    if budget_tokens is not None:
        exemplars = fit_exemplars(exemplars, budget_tokens)
    return Selection(exemplars=exemplars, refs=exemplar_refs(exemplars))
