"""The session store: session directory, append-only trace, git history, listing, rescoring
and exports. The engine and the UI use ``Session``; the CLI also uses listing and export."""

from cudal1_tui.store.history import HistoryEntry
from cudal1_tui.store.listing import SessionSummary, list_sessions, resolve_session
from cudal1_tui.store.meta import SessionMeta
from cudal1_tui.store.naming import new_record_id
from cudal1_tui.store.session import Session

__all__ = [
    "HistoryEntry",
    "Session",
    "SessionMeta",
    "SessionSummary",
    "list_sessions",
    "new_record_id",
    "resolve_session",
]
