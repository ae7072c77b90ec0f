"""The app's bridge to the store: export the open session, find a session's problem file."""

from __future__ import annotations

from pathlib import Path

from cudal1_tui.store.meta import read_meta
from cudal1_tui.ui.screens.export_screen import ExportRequest


def export_session(session_path: Path, request: ExportRequest) -> Path:
    """Write the export with the store's exporter; return the file written (absolute)."""
    from cudal1_tui.store.export import ExportOptions, export_sessions

    options = ExportOptions(only_accepted=request.only_accepted)
    destination = Path(request.destination).expanduser()
    result = export_sessions([str(session_path)], request.format, options, destination)
    return result.path.resolve()


def problem_path_of(session: Path, fallback: Path) -> Path:
    """The problem file a session was opened on, when it still exists."""
    recorded = read_meta(session).problem_path
    if recorded and Path(recorded).is_file():
        return Path(recorded)
    return fallback
