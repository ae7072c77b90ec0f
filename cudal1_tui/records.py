"""The domain records: messages, sampling settings, parsed sections, exemplar references and
the trace record (one per candidate, appended to ``trace.jsonl`` by the store).

Schema-versioned. Exports (SFT, preference, verl) are derived from these records.
A record is written once when its verdict is known; later decisions (accept,
reject, undo) are appended as small ``decision`` records that refer to it, so the
file stays append-only.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

TRACE_SCHEMA_VERSION = 1

Decision = Literal["pending", "accepted", "rejected", "undone"]


@dataclass
class Message:
    role: Literal["system", "user", "assistant"]
    content: str


@dataclass
class SamplingSettings:
    temperature: float = 0.7
    top_p: float = 0.95
    max_tokens: int = 8192
    n: int = 1
    seed: int | None = None


@dataclass
class ExemplarRef:
    """An earlier candidate shown to the model in the prompt."""

    record_id: str
    speedup: float | None
    status: str
    role: str = "contrast"  # "best", "accepted", "contrast", "failure", "builtin"


@dataclass
class ParsedSections:
    performance_analysis: str = ""
    algorithm_design: str = ""
    code_implementation: str = ""


@dataclass
class CandidateRecord:
    """Everything known about one candidate, as an RL reward record."""

    record_id: str
    session_id: str
    round: int
    slot: int
    source: str  # "model" or "builtin:<strategy>"
    problem_name: str
    code: str
    result: dict[str, Any]  # cudal1_evaluator.Result.to_dict()
    reward: float
    reward_formula: str
    status: str
    speedup: float | None
    prompt_messages: list[Message] = field(default_factory=list)
    exemplars: list[ExemplarRef] = field(default_factory=list)
    model: str = ""
    sampling: SamplingSettings | None = None
    raw_response: str = ""
    reasoning: str = ""
    sections: ParsedSections = field(default_factory=ParsedSections)
    parse_error: str = ""
    gate_findings: list[dict[str, str]] = field(default_factory=list)
    usage: dict[str, Any] = field(default_factory=dict)
    decision: Decision = "pending"
    started_at: str = ""
    finished_at: str = ""
    kind: Literal["candidate"] = "candidate"
    schema_version: int = TRACE_SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CandidateRecord:
        data = dict(data)
        data["prompt_messages"] = [Message(**m) for m in data.get("prompt_messages", [])]
        data["exemplars"] = [ExemplarRef(**e) for e in data.get("exemplars", [])]
        sampling = data.get("sampling")
        data["sampling"] = SamplingSettings(**sampling) if sampling else None
        data["sections"] = ParsedSections(**data.get("sections", {}))
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass
class DecisionRecord:
    """The user's verdict on a candidate (accept/reject/undo), appended later."""

    record_id: str
    decision: Decision
    commit: str = ""
    at: str = ""
    kind: Literal["decision"] = "decision"
    schema_version: int = TRACE_SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DecisionRecord:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})
