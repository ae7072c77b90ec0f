"""``cudal1-tui sessions prune``: remove empty sessions, and old ones when asked.

A session in use (its lock held by a running app) is never removed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cudal1_tui.session_cleanup import remove_session
from cudal1_tui.store import SessionSummary


@dataclass(frozen=True)
class Doomed:
    summary: SessionSummary
    why: str


def _created(summary: SessionSummary) -> datetime | None:
    try:
        when = datetime.fromisoformat(summary.created_at)
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def choose(sessions: list[SessionSummary], older_than_days: float | None,
           now: datetime | None = None) -> list[Doomed]:
    """Empty sessions always; sessions created more than ``older_than_days`` ago when set."""
    cutoff = None if older_than_days is None else (
        (now or datetime.now(UTC)) - timedelta(days=older_than_days))
    doomed = []
    for summary in sessions:
        created = _created(summary)
        if summary.candidates == 0:
            doomed.append(Doomed(summary, "empty"))
        elif cutoff is not None and created is not None and created < cutoff:
            doomed.append(Doomed(summary, f"older than {older_than_days:g} days"))
    return doomed


def remove(folder: Path) -> bool:
    return remove_session(folder)
