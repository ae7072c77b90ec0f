"""A speedup as every CLI table and log line writes it."""

from __future__ import annotations

NO_SPEEDUP = "—"
DASH = "-"  # what the session tables (sessions, show, rescore) write instead


def speed_text(value: float | None, missing: str = NO_SPEEDUP) -> str:
    """``2.31x``, or ``missing`` when there is no speedup (not verified, not measured)."""
    return f"{value:.2f}x" if value is not None else missing
