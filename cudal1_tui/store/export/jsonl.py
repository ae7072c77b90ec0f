"""``jsonl``: the raw candidate rows of several sessions, decisions folded in.

Each row is a ``CandidateRecord`` as in ``trace.jsonl`` (``session_id`` set) with its
latest decision; decision rows themselves are not repeated.
"""

from __future__ import annotations

from pathlib import Path

from cudal1_tui.store.export.common import ExportOptions, SessionData, selected, write_jsonl

EXTENSION = "jsonl"


def write(sessions: list[SessionData], options: ExportOptions, path: Path) -> int:
    rows = []
    for data in sessions:
        for record in selected(data, options):
            row = record.to_dict()
            row["session_id"] = row.get("session_id") or data.session_id
            rows.append(row)
    write_jsonl(path, rows)
    return len(rows)
