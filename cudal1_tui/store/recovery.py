"""What a damaged session still tells: metadata from its trace when ``session.json`` is gone,
candidate files from the trace when ``candidates/`` is, and git locks a dead writer left.

Readers (``sessions``, ``show``, ``export``, resume) get the intact part and a warning that
names the damage, never a traceback.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

from cudal1_tui.errors import SessionError
from cudal1_tui.records import CandidateRecord
from cudal1_tui.store import naming
from cudal1_tui.store.meta import META_FILE, SessionMeta, read_meta, write_meta
from cudal1_tui.store.trace import read_trace

STALE_GIT_LOCK_S = 5.0  # git holds index.lock for milliseconds; older ones are a dead writer's


def is_session_dir(path: Path) -> bool:
    """``session.json``, or (it deleted) a non-empty trace beside the reference or a git
    repository (an empty one without ``session.json`` is a create that never finished)."""
    if (path / META_FILE).is_file():
        return True
    trace = path / naming.TRACE_FILE
    try:
        has_records = trace.stat().st_size > 0
    except OSError:
        return False
    return has_records and ((path / naming.REFERENCE_FILE).is_file() or (path / ".git").is_dir())


def recover_meta(directory: Path) -> SessionMeta:
    """A ``SessionMeta`` rebuilt from the trace's records and ``problem.py``."""
    contents = read_trace(directory / naming.TRACE_FILE)
    first = contents.candidates[0] if contents.candidates else None
    models = [c.model for c in contents.candidates if c.model]
    meta = SessionMeta(session_id=first.session_id if first and first.session_id
                       else directory.name,
                       problem_name=first.problem_name if first else _name_from(directory),
                       created_at=first.started_at if first else "",
                       model=models[-1] if models else "",
                       extra={"recovered_from_trace": True})
    with contextlib.suppress(OSError):
        meta.problem_source = (directory / naming.REFERENCE_FILE).read_text(encoding="utf-8")
    return meta


def _name_from(directory: Path) -> str:
    """``2026-11-21_0615_diag_matmul_ab12cd`` -> ``diag_matmul``."""
    parts = directory.name.split("_")
    return "_".join(parts[2:-1]) if len(parts) > 3 else directory.name


def load_meta(directory: Path) -> tuple[SessionMeta, str]:
    """(meta, warning): ``session.json``, or when it is missing or unreadable, the trace's
    account of it (``warning`` then says so)."""
    try:
        return read_meta(directory), ""
    except SessionError as exc:
        if not (directory / naming.TRACE_FILE).is_file():
            raise
        why = "missing" if not (directory / META_FILE).exists() else f"unreadable ({exc.message})"
    return recover_meta(directory), f"{META_FILE} is {why}: metadata recovered from the trace"


def restore_meta(directory: Path, meta: SessionMeta) -> None:
    """A writer puts a recovered ``session.json`` back."""
    with contextlib.suppress(OSError):
        write_meta(directory, meta)


def restore_candidate_files(directory: Path, records: list[CandidateRecord]) -> int:
    """Re-create candidate files from the trace (their code is in every record); returns how
    many were missing."""
    folder = directory / naming.CANDIDATES_DIR
    folder.mkdir(exist_ok=True)
    restored = 0
    for record in records:
        file = folder / naming.candidate_file(record.round, record.slot, record.record_id)
        if not file.exists():
            file.write_text(record.code, encoding="utf-8")
            restored += 1
    return restored


def clear_stale_git_lock(directory: Path, wait_s: float = STALE_GIT_LOCK_S) -> str:
    """Remove ``.git/index.lock`` when its writer is gone. Git records no owner, so the caller
    must hold the session lock (no other cudal1-tui process writes this session); a lock
    that stays for ``wait_s`` is then a dead writer's. Returns a note when one was removed."""
    lock = directory / ".git" / "index.lock"
    deadline = time.monotonic() + wait_s
    while lock.exists():
        try:
            age = time.time() - lock.stat().st_mtime
        except OSError:
            return ""
        if age >= wait_s or time.monotonic() >= deadline:
            with contextlib.suppress(FileNotFoundError):
                lock.unlink()
            return f"removed a stale .git/index.lock ({age:.0f} s old, its writer is gone)"
        time.sleep(0.1)
    return ""
