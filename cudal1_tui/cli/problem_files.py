"""``cudal1-tui run DIR_OR_FILES...``: the problem files named, directories expanded."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class ProblemList:
    files: list[Path] = field(default_factory=list)
    missing: list[Path] = field(default_factory=list)  # named but not there
    empty: list[Path] = field(default_factory=list)  # directories without a .py file


def in_directory(directory: Path) -> list[Path]:
    """The directory's own ``*.py`` files (not its subdirectories'), by name; ``_*.py``
    (``__init__.py``, helpers) are not problems."""
    return sorted(p for p in directory.glob("*.py") if p.is_file() and not p.name.startswith("_"))


def expand(paths: list[Path]) -> ProblemList:
    """Every problem file, each once, in the order named (a directory's files by name)."""
    out = ProblemList()
    seen: set[Path] = set()
    for path in paths:
        if path.is_dir():
            found = in_directory(path)
            if not found:
                out.empty.append(path)
        elif path.is_file():
            found = [path]
        else:
            out.missing.append(path)
            continue
        for file in found:
            key = file.resolve()
            if key not in seen:
                seen.add(key)
                out.files.append(file)
    return out
