"""Turning what a round learned about one candidate into its trace record."""

from __future__ import annotations

from dataclasses import dataclass

from cudal1_evaluator.schema import Flag, Result, RewardSpec
from cudal1_tui.judging import unevaluated
from cudal1_tui.records import DRAFT_FIELDS, CandidateDraft, CandidateRecord
from cudal1_tui.store.naming import new_record_id, now_iso


@dataclass
class Draft(CandidateDraft):
    """A candidate before its verdict; a fresh one gets its record id and start time."""

    def __post_init__(self) -> None:
        self.record_id = self.record_id or new_record_id(self.round, self.slot)
        self.started_at = self.started_at or now_iso()


COMPILE_SOURCE = "builtin:torch-compile-default"


def torch_compile_ms(records: list[CandidateRecord]) -> float | None:
    """torch.compile's time on this problem, from the latest record that measured it: the
    evaluator's own comparison when it ran one, else the built-in ``torch.compile`` (default
    mode) candidate's time."""
    found: float | None = None
    for record in records:
        timing = record.result.timing
        compared = timing.get("torch_compile")
        if record.source == COMPILE_SOURCE and record.status == "ok":
            compared = compared or timing.get("candidate")
        if compared is not None and compared.median_ms:
            found = float(compared.median_ms)
    return found


def refused(message: str, reward_name: str, code: str = "parse_error") -> Result:
    """The verdict on a reply that never reached the evaluator (no usable code)."""
    return unevaluated("rejected", message, reward=RewardSpec(name=reward_name),
                       flags=[Flag(code=code, reason=message)])


def finish(draft: Draft, result: Result, *, session_id: str, problem_name: str) -> CandidateRecord:
    known_before = {name: getattr(draft, name) for name in DRAFT_FIELDS}
    return CandidateRecord(
        **known_before,
        session_id=session_id,
        problem_name=problem_name,
        result=result,
        reward=result.reward,
        reward_formula=result.reward_formula,
        status=result.status,
        # every candidate that ran correctly keeps its measured speedup, rejected ones too
        speedup=result.speedup if result.status == "ok" or result.correct else None,
        finished_at=now_iso(),
    )
