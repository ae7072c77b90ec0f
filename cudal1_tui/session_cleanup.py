"""Remove a session directory, never one a running app holds (its lock)."""

from __future__ import annotations

import shutil
from pathlib import Path

from cudal1_tui.errors import SessionError
from cudal1_tui.store.lock import SessionLock
from cudal1_tui.store.meta import META_FILE
from cudal1_tui.store.naming import LOCK_FILE


def remove_session(folder: Path) -> bool:
    """Delete ``folder`` (a session: it holds the meta file) unless its lock is held."""
    if not (folder / META_FILE).is_file():
        return False
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
