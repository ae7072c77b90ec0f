"""What exemplar selection works on (candidates) and what it hands to the prompt (exemplars)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from cudal1_tui.prompting.excerpt import error_excerpt
from cudal1_tui.records import CandidateRecord, ExemplarRef

ExemplarRole = Literal["best", "accepted", "contrast", "failure", "builtin"]


@dataclass(frozen=True)
class ExemplarCandidate:
    """An evaluated candidate of the session, as far as exemplar selection cares."""

    record_id: str
    code: str
    status: str
    speedup: float | None
    error: str = ""
    source: str = "model"  # "model" or "builtin:<strategy>"
    decision: str = "pending"
    speedup_bound: str = ""  # ``Result.speedup_bound``: "at_least" or ""

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.speedup is not None and self.speedup > 0

    @property
    def builtin(self) -> bool:
        return self.source.startswith("builtin")

    @classmethod
    def from_record(cls, record: CandidateRecord, decision: str | None = None) -> ExemplarCandidate:
        """Build from a trace record; ``decision`` overrides the record's (from later rows)."""
        return cls(
            record_id=record.record_id,
            code=record.code,
            status=record.status,
            speedup=record.speedup,
            error=error_excerpt(record.status, record.result, record.parse_error),
            source=record.source,
            decision=decision if decision is not None else record.decision,
            speedup_bound=record.result.speedup_bound,
        )


@dataclass(frozen=True)
class Exemplar:
    """One earlier candidate as shown in the prompt."""

    record_id: str
    code: str
    speedup: float | None
    status: str
    error: str = ""
    role: ExemplarRole = "contrast"
    truncated: bool = False  # code shortened (head and tail kept) for the token budget
    dropped: bool = False  # code left out entirely for the token budget; score still shown
    source: str = "model"
    speedup_bound: str = ""

    @classmethod
    def of(cls, candidate: ExemplarCandidate, role: ExemplarRole) -> Exemplar:
        return cls(
            record_id=candidate.record_id,
            code=candidate.code,
            speedup=candidate.speedup,
            status=candidate.status,
            error=candidate.error if candidate.status != "ok" else "",
            role=role,
            source=candidate.source,
            speedup_bound=candidate.speedup_bound,
        )

    def ref(self) -> ExemplarRef:
        return ExemplarRef(
            record_id=self.record_id, speedup=self.speedup, status=self.status, role=self.role
        )


def exemplar_refs(exemplars: list[Exemplar]) -> list[ExemplarRef]:
    """The trace's record of what was shown: ids, scores, statuses and roles."""
    return [e.ref() for e in exemplars]
