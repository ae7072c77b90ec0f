"""``trace.jsonl``: append-only, one JSON object per line, fsynced per record.

Writers open with ``O_APPEND`` and write each row with one ``write`` call followed by
``fsync``. Readers skip a torn last line (a kill mid-write) with a warning and keep the
first copy of a duplicated ``record_id``.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from cudal1_tui.errors import SessionError
from cudal1_tui.records import TRACE_SCHEMA_VERSION, CandidateRecord, DecisionRecord

log = logging.getLogger(__name__)


@dataclass
class TraceContents:
    """What a trace file holds: candidates in file order, decisions, reader warnings."""

    candidates: list[CandidateRecord] = field(default_factory=list)
    decisions: list[DecisionRecord] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def folded(self) -> list[CandidateRecord]:
        return fold_decisions(self.candidates, self.decisions)


def fold_decisions(
    candidates: list[CandidateRecord], decisions: list[DecisionRecord]
) -> list[CandidateRecord]:
    """Copies of the candidates with each one's latest decision applied."""
    latest = {d.record_id: d.decision for d in decisions}
    return [replace(c, decision=latest.get(c.record_id, c.decision)) for c in candidates]


def read_trace(path: Path) -> TraceContents:
    """Parse a trace; never raises on damaged lines, reports them in ``warnings``."""
    out = TraceContents()
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return out
    lines = data.split(b"\n")
    seen: set[str] = set()
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        last = number == len(lines)  # no newline after it: possibly torn
        row = _parse(raw, path, number, last, out.warnings)
        if row is not None:
            _add_row(row, out, seen, f"{path.name}:{number}")
    for message in out.warnings:
        log.warning(message)
    return out


def _parse(
    raw: bytes, path: Path, number: int, last: bool, warnings: list[str]
) -> dict[str, object] | None:
    try:
        row = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        what = "torn last line (interrupted write)" if last else "unreadable line"
        warnings.append(f"{path.name}:{number}: skipped a {what}")
        return None
    if not isinstance(row, dict):
        warnings.append(f"{path.name}:{number}: skipped a line that is not a JSON object")
        return None
    return row


def _add_row(row: Mapping[str, object], out: TraceContents, seen: set[str], where: str) -> None:
    version = row.get("schema_version", TRACE_SCHEMA_VERSION)
    if isinstance(version, int) and version > TRACE_SCHEMA_VERSION:
        out.warnings.append(f"{where}: written by a newer cudal1-tui (schema {version}); "
                            "fields it added are ignored")
    kind = row.get("kind")
    try:
        if kind == "candidate":
            record = CandidateRecord.from_dict(row)
            if record.record_id in seen:
                return  # a re-recorded round after a resume: the first copy wins
            seen.add(record.record_id)
            out.candidates.append(record)
        elif kind == "decision":
            out.decisions.append(DecisionRecord.from_dict(row))
        else:
            out.warnings.append(f"{where}: skipped a row of unknown kind {kind!r}")
    except (TypeError, ValueError) as exc:
        out.warnings.append(f"{where}: skipped a malformed {kind} row ({exc})")


class TraceWriter:
    """Appends rows to one trace file; each ``append`` is on disk when it returns."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def open(self) -> str:
        """Open for appending; returns a warning when a torn tail had to be repaired."""
        warning = _repair_tail(self.path)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        return warning

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def append(self, row: Mapping[str, object]) -> None:
        if self._fd is None:
            raise SessionError(f"{self.path} is not open for writing",
                               fix="open the session for writing (not read-only)")
        data = (json.dumps(row, ensure_ascii=False) + "\n").encode("utf-8")
        good = os.fstat(self._fd).st_size  # one writer (the session lock): the row starts here
        try:
            view = memoryview(data)
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
            os.fsync(self._fd)
        except OSError as exc:
            raise self._undo(good, exc) from None

    def _undo(self, good: int, exc: OSError) -> SessionError:
        """Cut a failed row off (disk full, file too large), so the next one starts clean."""
        assert self._fd is not None
        try:
            os.ftruncate(self._fd, good)
            os.fsync(self._fd)
            state = f"the trace was cut back to its last complete record ({good} bytes)"
        except OSError as again:
            state = f"and cutting the partial row off failed too ({again.strerror})"
        log.error("%s: a record could not be written: %s; %s", self.path, exc.strerror, state)
        return SessionError(f"{self.path}: a record could not be written "
                            f"({exc.strerror or exc}); {state}",
                            fix="free disk space (or raise the file-size limit), then resume "
                            "the session")


def _repair_tail(path: Path) -> str:
    """Before appending, make sure the file ends at a line boundary.

    A complete JSON row that only lost its newline keeps its data (we add the newline);
    a torn fragment is moved to ``<trace>.torn`` so the next row does not glue onto it.
    """
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return ""
    if size == 0:
        return ""
    warning = ""
    with path.open("rb+") as fh:
        fh.seek(size - 1)
        if fh.read(1) == b"\n":
            return ""  # the common case: no need to read the file
        fh.seek(0)
        data = fh.read()
        cut = data.rfind(b"\n") + 1
        tail = data[cut:]
        if _is_json_object(tail):
            fh.seek(0, os.SEEK_END)
            fh.write(b"\n")
        else:
            with path.with_name(path.name + ".torn").open("ab") as torn:
                torn.write(tail + b"\n")
            fh.truncate(cut)
            warning = f"{path.name}: moved a torn last line (interrupted write) to " \
                f"{path.name}.torn"
            log.warning(warning)
        fh.flush()
        os.fsync(fh.fileno())
    return warning


def _is_json_object(raw: bytes) -> bool:
    try:
        return isinstance(json.loads(raw), dict)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False
