"""Finding sessions: list them all, or resolve an id, a unique prefix or a path."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from cudal1_tui.errors import SessionError
from cudal1_tui.records import JsonObject
from cudal1_tui.store import naming
from cudal1_tui.store.history import History, accepted_record_id
from cudal1_tui.store.recovery import is_session_dir, load_meta
from cudal1_tui.store.trace import read_trace

log = logging.getLogger(__name__)


@dataclass
class SessionSummary:
    """One line of ``cudal1-tui sessions``."""

    session_id: str
    folder: str
    problem: str
    created_at: str
    candidates: int
    best_speedup: float | None
    accepted_speedup: float | None
    accepted_record: str
    model: str
    warnings: list[str] = field(default_factory=list)  # damage found while reading it

    def to_dict(self) -> JsonObject:
        return asdict(self)


def _is_session(path: Path) -> bool:
    return is_session_dir(path)


def _session_dirs(root: Path) -> list[Path]:
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and _is_session(p))


def resolve_session(ref: str, root: Path | None) -> Path:
    """The session directory named by a path, an id, a unique id prefix, or the random tail."""
    as_path = Path(ref).expanduser()
    if _is_session(as_path):
        return as_path.resolve()
    if root is None:
        raise SessionError(f"{ref} is not a session directory",
                           fix="pass the path of a session directory")
    dirs = _session_dirs(root)
    tests: list[Callable[[str], bool]] = [
        lambda name: name == ref,
        lambda name: name.startswith(ref),
        lambda name: name.rsplit("_", 1)[-1].startswith(ref),  # the random tail alone
    ]
    for test in tests:
        matches = [d for d in dirs if test(d.name)]
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            names = ", ".join(d.name for d in matches[:5])
            raise SessionError(f"{ref!r} matches {len(matches)} sessions: {names}",
                               fix="give more characters of the id")
    hint = f"; newest: {dirs[-1].name}" if dirs else ""
    raise SessionError(f"no session {ref!r} under {root}{hint}",
                       fix="`cudal1-tui sessions` lists them (or pass --sessions-dir)")


def summarize(path: Path) -> SessionSummary:
    meta, meta_warning = load_meta(path)
    contents = read_trace(path / naming.TRACE_FILE)
    records = contents.folded()
    speeds = [r.speedup for r in records if r.status == "ok" and r.speedup is not None]
    history = History.open(path, optional=True)
    live = accepted_record_id(history, contents.decisions)
    accepted = next((r for r in records if live and r.record_id == live), None)
    return SessionSummary(
        session_id=meta.session_id or path.name,
        folder=str(path),
        problem=meta.problem_name,
        created_at=meta.created_at,
        candidates=len(records),
        best_speedup=max(speeds, default=None),
        accepted_speedup=accepted.speedup if accepted else None,
        accepted_record=accepted.record_id if accepted else "",
        model=meta.model,
        warnings=[w for w in (meta_warning, history.damage, *contents.warnings) if w],
    )


def list_sessions(root: Path) -> list[SessionSummary]:
    """Every readable session under ``root``, newest first; damaged ones are logged, skipped."""
    out: list[SessionSummary] = []
    for path in _session_dirs(root):
        try:
            summary = summarize(path)
        except SessionError as exc:
            log.warning("skipped %s: %s", path.name, exc.message)
            continue
        except OSError as exc:
            log.warning("skipped %s: %s", path.name, exc)
            continue
        for warning in summary.warnings:
            log.warning("%s: %s", path.name, warning)
        out.append(summary)
    return sorted(out, key=lambda s: (s.created_at, s.session_id), reverse=True)
