"""Read a problem file from disk, refusing what cannot be a Python module, and inspect it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cudal1_tui.errors import ProblemError
from cudal1_tui.problem.inspect import inspect_source
from cudal1_tui.problem.model import Inspection

MAX_BYTES = 2_000_000
_FIX = "pass a Python problem file, e.g. examples/diag_matmul.py"


@dataclass
class LoadedProblem:
    path: Path
    source: str
    inspection: Inspection

    @property
    def name(self) -> str:
        return self.path.stem


def read_source(path: Path | str) -> str:
    """The file's text; ProblemError when it is missing, a directory, binary or not UTF-8."""
    path = Path(path)
    if not path.exists():
        raise ProblemError(f"{path}: no such file", fix=_FIX)
    if path.is_dir():
        raise ProblemError(f"{path}: is a directory, not a problem file", fix=_FIX)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ProblemError(f"{path}: cannot be read ({exc.strerror or exc})",
                           fix="check the file's permissions") from exc
    if len(data) > MAX_BYTES:
        raise ProblemError(f"{path}: {len(data)} bytes is too large for a problem file "
                           f"(limit {MAX_BYTES})", fix=_FIX)
    if b"\x00" in data:
        raise ProblemError(f"{path}: is a binary file (it holds NUL bytes), not Python source",
                           fix=_FIX)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ProblemError(
            f"{path}: is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}, "
            f"line {line})", fix="save the file as UTF-8") from exc


def load_problem(path: Path | str) -> LoadedProblem:
    """Read and inspect; ProblemError (with every finding and the contract) unless it is valid."""
    source = read_source(path)
    inspection = inspect_source(source, str(path))
    if not inspection.ok:
        raise ProblemError(inspection.report(), fix="fix the file as listed above")
    return LoadedProblem(Path(path), source, inspection)
