"""One baseline everywhere: the header's reference is the one a row's speedup divides by.

Every evaluation times the reference again beside its candidate, so references are per row.
The header shows the selected row's (``row 1.2``), or the newest timed row's while the
selected one has no times, or the probe's first estimate before any row was timed; it says
which. Its torch.compile time is the *reference* under torch.compile
(``timing["torch_compile"]``) of that same row, never a candidate's time.
"""

from __future__ import annotations

from dataclasses import dataclass

from cudal1_evaluator.schema import Result
from cudal1_tui.measurements import basis
from cudal1_tui.records import CandidateRecord

PROBE_LABEL = "probe estimate"


@dataclass(frozen=True)
class HeaderReference:
    label: str  # "row 1.2", "row 1.2, alone +5 %", "probe estimate"
    eager_ms: float | None
    torch_compile_ms: float | None


def _median(result: Result, key: str) -> float | None:
    summary = result.timing.get(key)
    value = summary.median_ms if summary is not None else None
    return float(value) if isinstance(value, int | float) and value > 0 else None


def row_reference(record: CandidateRecord) -> HeaderReference | None:
    """The reference ``record``'s speedup divides by; None when it was not timed."""
    found = basis(record.result)
    if found is None:
        return None
    kind = "" if found.kind == "beside" else f", {found.kind}"
    return HeaderReference(f"row {record.round}.{record.slot}{kind}", found.reference_ms,
                           _median(record.result, "torch_compile"))


def header_reference(selected: CandidateRecord | None,
                     records: list[CandidateRecord]) -> HeaderReference | None:
    """The selected row's reference, else the newest timed row's; None when no row was timed."""
    if selected is not None:
        own = row_reference(selected)
        if own is not None:
            return own
    for record in sorted(records, key=lambda r: (r.round, r.slot), reverse=True):
        found = row_reference(record)
        if found is not None:
            return found
    return None
