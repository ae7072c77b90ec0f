"""Exports: training data (openai-chat, trl, trl-preference, verl, jsonl) and the module.

``export_sessions(refs, fmt, options, output, root)`` opens each session read-only,
applies the filters and writes one file; each format lives in its own module with
``EXTENSION`` and ``write(sessions, options, path) -> rows``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from types import ModuleType

from cudal1_tui.errors import ExportError
from cudal1_tui.store.export import jsonl, module, openai_chat, trl, trl_preference, verl
from cudal1_tui.store.export.common import ExportOptions, SessionData, load_session
from cudal1_tui.store.naming import slug
from cudal1_tui.store.session import Session

FORMATS: dict[str, ModuleType] = {
    "openai-chat": openai_chat,
    "trl": trl,
    "trl-preference": trl_preference,
    "verl": verl,
    "jsonl": jsonl,
    "module": module,
}

Writer = Callable[[list[SessionData], ExportOptions, Path], int]


@dataclass
class ExportResult:
    path: Path
    rows: int
    sessions: int


def default_output(fmt: str, sessions: list[SessionData]) -> Path:
    """``<format>-<date>.<ext>`` in the current directory; the module gets an importable
    name, ``optimized_<problem>.py``."""
    if fmt == "module" and sessions:
        return Path(f"optimized_{slug(sessions[0].problem_name)}.py")
    return Path(f"{fmt}-{date.today().isoformat()}.{FORMATS[fmt].EXTENSION}")


def export_sessions(
    refs: list[str],
    fmt: str,
    options: ExportOptions,
    output: Path | None = None,
    root: Path | None = None,
) -> ExportResult:
    if fmt not in FORMATS:
        raise ExportError(f"unknown export format {fmt!r}", fix=f"use one of: {', '.join(FORMATS)}")
    sessions = []
    for ref in refs:
        session = Session.open(ref, root, readonly=True)
        try:
            sessions.append(load_session(session, options))
        finally:
            session.close()
    path = output or default_output(fmt, sessions)
    if path.is_dir():
        path = path / default_output(fmt, sessions).name
    writer: Writer = FORMATS[fmt].write
    try:
        rows = writer(sessions, options, path)
    except OSError as exc:
        raise ExportError(f"cannot write {path}: {exc}", fix="choose another -o path") from None
    return ExportResult(path, rows, len(sessions))


__all__ = ["FORMATS", "ExportOptions", "ExportResult", "SessionData", "export_sessions"]
