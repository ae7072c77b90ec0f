"""The app's bridge to the store: export the open session, find a session's problem file."""

from __future__ import annotations

from pathlib import Path

from cudal1_tui.store.meta import read_meta
from cudal1_tui.ui.screens.export_screen import ExportRequest


def export_session(session_path: Path, request: ExportRequest) -> tuple[Path, int]:
    """Write the export with the store's exporter; return the file written (absolute) and
    its rows. An export without rows leaves no file (the caller says why)."""
    from cudal1_tui.store.export import ExportOptions, export_sessions

    options = ExportOptions(only_accepted=request.only_accepted)
    destination = Path(request.destination).expanduser()
    result = export_sessions([str(session_path)], request.format, options, destination)
    written = result.path.resolve()
    if result.rows == 0:
        written.unlink(missing_ok=True)
    return written, result.rows


def nothing_exported(request: ExportRequest) -> str:
    """Why an export wrote nothing, and what to change."""
    if request.only_accepted:
        return ("nothing exported: no candidate of this session is accepted; accept one "
                "(a), or untick \"accepted candidates only\"")
    return f"nothing exported: this session holds no candidate the {request.format} format keeps"


def problem_path_of(session: Path, fallback: Path) -> Path:
    """The problem file a session was opened on, when it still exists."""
    recorded = read_meta(session).problem_path
    if recorded and Path(recorded).is_file():
        return Path(recorded)
    return fallback
