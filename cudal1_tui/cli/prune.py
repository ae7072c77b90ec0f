"""``cudal1-tui sessions prune``: remove empty sessions, and old ones when asked.

A session in use (its lock held by a running app) is never removed.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cudal1_tui.errors import SessionError
from cudal1_tui.store import SessionSummary
from cudal1_tui.store.lock import SessionLock
from cudal1_tui.store.naming import LOCK_FILE


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
    """Delete one session directory unless a running app holds its lock."""
    lock = SessionLock(folder / LOCK_FILE)
    try:
        lock.acquire()
    except SessionError:
        return False
    try:
        shutil.rmtree(folder)
    finally:
        lock.release()
    return True
