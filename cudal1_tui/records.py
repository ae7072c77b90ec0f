"""The domain records: messages, sampling settings, parsed sections, exemplar references and
the trace record (one per candidate, appended to ``trace.jsonl`` by the store).

Schema-versioned. Exports (SFT, preference, verl) are derived from these records.
A record is written once when its verdict is known; later decisions (accept,
reject, undo) are appended as small ``decision`` records that refer to it, so the
file stays append-only. The record holds the evaluator's typed ``Result``; it becomes a
dict only here, in ``to_dict``/``from_dict``, at the store's boundary.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from cudal1_evaluator.schema import STATUSES, Flag, Result

TRACE_SCHEMA_VERSION = 1

Decision = Literal["pending", "accepted", "rejected", "undone"]
UsageValue = int | float | str | bool | None | dict[str, int]  # reply_cut: the sizes cut
# What JSON holds: session.json's free-form parts and the export rows.
JsonValue = str | int | float | bool | None | list["JsonValue"] | dict[str, "JsonValue"]
JsonObject = dict[str, JsonValue]


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
class CandidateDraft:
    """A candidate before its verdict: where it came from and what it says. The trace record
    extends it with the verdict, so the two never list the same fields twice."""

    round: int
    slot: int
    source: str  # "model" or "builtin:<strategy>"
    code: str = ""
    record_id: str = ""
    started_at: str = ""
    prompt_messages: list[Message] = field(default_factory=list)
    exemplars: list[ExemplarRef] = field(default_factory=list)
    model: str = ""
    sampling: SamplingSettings | None = None
    raw_response: str = ""
    reasoning: str = ""
    sections: ParsedSections = field(default_factory=ParsedSections)
    parse_error: str = ""
    usage: dict[str, UsageValue] = field(default_factory=dict)


@dataclass(kw_only=True)
class CandidateRecord(CandidateDraft):
    """Everything known about one candidate, as an RL reward record."""

    session_id: str
    problem_name: str
    result: Result
    reward: float
    reward_formula: str
    status: str
    speedup: float | None
    # Static-gate findings of traces written before they lived only in ``result.flags``;
    # those repeated in ``result.flags`` are dropped when read.
    gate_findings: list[Flag] = field(default_factory=list)
    decision: Decision = "pending"
    finished_at: str = ""
    kind: Literal["candidate"] = "candidate"
    schema_version: int = TRACE_SCHEMA_VERSION

    def flag_codes(self, *, include_info: bool) -> list[str]:
        """The evaluator's and the gate's finding codes, each once. ``info`` notes (a reused
        pristine reference, a speedup inside the noise) are measurement remarks: a listing of
        everything keeps them, a list of what needs confirming drops them."""
        return flag_codes([*self.result.flags, *self.gate_findings], include_info=include_info)

    def to_dict(self) -> JsonObject:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CandidateRecord:
        """Read a stored row; rows of older versions (fewer fields) load with defaults.
        Raises ValueError or TypeError on a malformed row."""
        row = dict(data)
        status = str(row.get("status", ""))
        row["result"] = result_from_stored(row.get("result"), status)
        row["prompt_messages"] = [Message(**m) for m in row.get("prompt_messages") or []]
        row["exemplars"] = [ExemplarRef(**e) for e in row.get("exemplars") or []]
        sampling = row.get("sampling")
        row["sampling"] = SamplingSettings(**sampling) if sampling else None
        row["sections"] = ParsedSections(**(row.get("sections") or {}))
        known_codes = {f.code for f in row["result"].flags}
        row["gate_findings"] = [g for g in map(_stored_flag, row.get("gate_findings") or [])
                                if g.code not in known_codes]
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in row.items() if k in known})


DRAFT_FIELDS = tuple(CandidateDraft.__dataclass_fields__)


def flag_codes(flags: list[Flag], *, include_info: bool) -> list[str]:
    """Finding codes in order, each once; ``info`` notes only when asked for."""
    codes = [f.code for f in flags if include_info or f.severity != "info"]
    return list(dict.fromkeys(codes))


def result_from_stored(data: object, record_status: str = "") -> Result:
    """The evaluator's ``Result`` from its stored dict. Rows of older versions lack newer
    fields (they take their defaults); a row without a status takes the record's."""
    if not isinstance(data, Mapping):
        raise ValueError(f"result is {type(data).__name__}, not an object")
    stored = dict(data)
    if stored.get("status") not in STATUSES:
        stored["status"] = record_status if record_status in STATUSES else "runtime_error"
    for name in ("flags", "trials"):
        if not all(isinstance(item, Mapping) for item in stored.get(name) or []):
            raise ValueError(f"result.{name} holds something that is not an object")
    timing = stored.get("timing") or {}
    if not isinstance(timing, Mapping) or not all(isinstance(v, Mapping) for v in timing.values()):
        raise ValueError("result.timing is not a map of timing summaries")
    stored["flags"], stored["trials"] = stored.get("flags") or [], stored.get("trials") or []
    stored["timing"] = timing
    return Result.from_dict(stored)


def _stored_flag(data: object) -> Flag:
    if not isinstance(data, Mapping):
        raise ValueError("a gate finding is not an object")
    code = str(data.get("code") or data.get("rule") or "gate")
    severity = data.get("severity")
    return Flag(code=code, reason=str(data.get("reason", "")),
                severity=severity if severity in ("reject", "warn", "info") else "reject")


@dataclass
class DecisionRecord:
    """The user's verdict on a candidate (accept/reject/undo), appended later."""

    record_id: str
    decision: Decision
    commit: str = ""
    at: str = ""
    kind: Literal["decision"] = "decision"
    schema_version: int = TRACE_SCHEMA_VERSION

    def to_dict(self) -> JsonObject:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DecisionRecord:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})
