"""Accepting a round's best candidate automatically (``run --accept-best``)."""

from __future__ import annotations

from cudal1_tui.engine.engine import Engine
from cudal1_tui.engine.round import RoundSummary


def accept_best(engine: Engine, summary: RoundSummary) -> str | None:
    """Accept the round's fastest verified candidate when it beats what is accepted (and 1.0x)."""
    ok = [r for r in summary.records if r.status == "ok" and r.speedup is not None]
    best = max(ok, key=lambda r: r.speedup or 0.0, default=None)
    if best is None or (best.speedup or 0.0) <= 1.0:
        return None
    current = engine.accepted()
    if current is not None and (current.speedup or 0.0) >= (best.speedup or 0.0):
        return None
    return engine.accept(best.record_id)
