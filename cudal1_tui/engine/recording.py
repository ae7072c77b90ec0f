"""Turning what a round learned about one candidate into its trace record."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cudal1_evaluator.schema import Flag, Result, RewardSpec
from cudal1_tui.judging import unevaluated
from cudal1_tui.store.naming import new_record_id, now_iso
from cudal1_tui.store.records import (
    CandidateRecord,
    ExemplarRef,
    Message,
    ParsedSections,
    SamplingSettings,
)


@dataclass
class Draft:
    """A candidate before its verdict: where it came from and what it says."""

    round: int
    slot: int
    source: str  # "model" or "builtin:<strategy>"
    code: str = ""
    record_id: str = ""
    started_at: str = field(default_factory=now_iso)
    prompt_messages: list[Message] = field(default_factory=list)
    exemplars: list[ExemplarRef] = field(default_factory=list)
    model: str = ""
    sampling: SamplingSettings | None = None
    raw_response: str = ""
    reasoning: str = ""
    sections: ParsedSections = field(default_factory=ParsedSections)
    parse_error: str = ""
    usage: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.record_id = self.record_id or new_record_id(self.round, self.slot)


COMPILE_SOURCE = "builtin:torch-compile-default"


def torch_compile_ms(records: list[CandidateRecord]) -> float | None:
    """torch.compile's time on this problem, from the latest record that measured it: the
    evaluator's own comparison when it ran one, else the built-in ``torch.compile`` (default
    mode) candidate's time."""
    found: float | None = None
    for record in records:
        timing = record.result.get("timing", {})
        compared = timing.get("torch_compile")
        if record.source == COMPILE_SOURCE and record.status == "ok":
            compared = compared or timing.get("candidate")
        if isinstance(compared, dict) and compared.get("median_ms"):
            found = float(compared["median_ms"])
    return found


def refused(message: str, reward_name: str, code: str = "parse_error") -> Result:
    """The verdict on a reply that never reached the evaluator (no usable code)."""
    return unevaluated("rejected", message, reward=RewardSpec(name=reward_name),
                       flags=[Flag(code=code, reason=message)])


def finish(draft: Draft, result: Result, *, session_id: str, problem_name: str) -> CandidateRecord:
    gate = [{"code": f.code, "reason": f.reason, "severity": f.severity}
            for f in result.flags if f.code.startswith("static")]
    return CandidateRecord(
        record_id=draft.record_id,
        session_id=session_id,
        round=draft.round,
        slot=draft.slot,
        source=draft.source,
        problem_name=problem_name,
        code=draft.code,
        result=result.to_dict(),
        reward=result.reward,
        reward_formula=result.reward_formula,
        status=result.status,
        speedup=result.speedup if result.status == "ok" else None,
        prompt_messages=draft.prompt_messages,
        exemplars=draft.exemplars,
        model=draft.model,
        sampling=draft.sampling,
        raw_response=draft.raw_response,
        reasoning=draft.reasoning,
        sections=draft.sections,
        parse_error=draft.parse_error,
        gate_findings=gate,
        usage=draft.usage,
        started_at=draft.started_at,
        finished_at=now_iso(),
    )
