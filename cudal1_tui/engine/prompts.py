"""What the model is asked in a round: the contrastive prompt, or a repair prompt.

A repair prompt replaces one slot's contrastive prompt when every model candidate of
the previous round failed and the latest one has code worth fixing (it compiled or
parsed far enough to fail in the evaluator); a repair of a repair is not asked for,
so a stubborn failure cannot hold the loop.
"""

from __future__ import annotations

from dataclasses import dataclass

from cudal1_tui.config import Settings
from cudal1_tui.prompting import (
    ExemplarCandidate,
    SelectionPolicy,
    Templates,
    render_contrastive,
    render_repair,
    select_exemplars,
)
from cudal1_tui.records import CandidateRecord, ExemplarRef, Message

REPAIRABLE = frozenset({"compile_error", "runtime_error", "incorrect", "timeout"})
REPAIR_ROLE = "repair"


@dataclass
class Prompt:
    messages: list[Message]
    exemplars: list[ExemplarRef]
    kind: str  # "contrastive" or "repair"


@dataclass(frozen=True)
class PromptContext:
    templates: Templates
    problem_source: str  # shown to the model: the user's file at its real sizes
    device: str
    reference_ms: float | None


def _is_repair(record: CandidateRecord) -> bool:
    return any(ref.role == REPAIR_ROLE for ref in record.exemplars)


def repair_target(records: list[CandidateRecord], round_: int) -> CandidateRecord | None:
    """The previous round's last model failure, when that round had no model success."""
    previous = [r for r in records if r.round == round_ - 1 and r.source == "model"]
    if not previous or any(r.status == "ok" for r in previous):
        return None
    failed = [r for r in previous if r.status in REPAIRABLE and r.code.strip()]
    if not failed or _is_repair(failed[-1]):
        return None
    return failed[-1]


def contrastive(ctx: PromptContext, records: list[CandidateRecord], settings: Settings,
                seed: int) -> Prompt:
    pool = [ExemplarCandidate.from_record(r) for r in records]
    selection = select_exemplars(pool, policy=SelectionPolicy.from_settings(settings), seed=seed)
    messages = render_contrastive(ctx.templates, ctx.problem_source, selection.exemplars,
                                  device=ctx.device, reference_ms=ctx.reference_ms)
    return Prompt(messages, selection.refs, "contrastive")


def repair(ctx: PromptContext, target: CandidateRecord) -> Prompt:
    failed = ExemplarCandidate.from_record(target)
    messages = render_repair(ctx.templates, ctx.problem_source, failed, device=ctx.device,
                             reference_ms=ctx.reference_ms)
    ref = ExemplarRef(record_id=target.record_id, speedup=target.speedup, status=target.status,
                      role=REPAIR_ROLE)
    return Prompt(messages, [ref], "repair")


def seed_for(base: int, round_: int, slot: int) -> int:
    """Distinct, reproducible exemplar draws per round and slot."""
    return base * 1_000_003 + round_ * 101 + slot
