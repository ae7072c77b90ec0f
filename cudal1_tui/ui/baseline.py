"""One baseline everywhere: the header's times come from the measurement the speedups use.

The eager time is the reference timed beside the candidates (``timing["reference"]`` of the
latest timed record; the probe's first estimate until then), and the torch.compile time is
the *reference* under torch.compile (``timing["torch_compile"]``), never a candidate's time.
"""

from __future__ import annotations

from cudal1_evaluator.schema import Result
from cudal1_tui.records import CandidateRecord


def _median(result: Result, key: str) -> float | None:
    summary = result.timing.get(key)
    value = summary.median_ms if summary is not None else None
    return float(value) if isinstance(value, int | float) and value > 0 else None


def latest_times(records: list[CandidateRecord]) -> tuple[float | None, float | None]:
    """(eager reference ms, torch.compile reference ms) from the newest records that hold
    them; None where no record measured one."""
    eager = compiled = None
    for record in sorted(records, key=lambda r: (r.round, r.slot)):
        eager = _median(record.result, "reference") or eager
        compiled = _median(record.result, "torch_compile") or compiled
    return eager, compiled
