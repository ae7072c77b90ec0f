"""Stable paths for extension sources a candidate writes at run time (``cpp_extension.load``).

Model output often writes its CUDA source into a fresh ``mkdtemp()`` dir and builds it with
``load``. That path differs in every process, and the path is part of ninja's build line, so the
extension compiled in the build stage was compiled again in the worker (135 s of nvcc for one
corpus kernel on a busy H100 host). Before the real ``load`` runs, each source outside the build
dir is copied, together with the small dir it sits in (a header beside it), to
``<build dir>/sources/<sha256 of that dir's files>/``: the same bytes get the same path in every
process, and the second process finds the build up to date. Sources in a large dir, or that
cannot be read, are passed on unchanged (the build then works as before, only slower).
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch.utils.cpp_extension as cpp_extension

MAX_DIR_FILES = 64
MAX_DIR_BYTES = 4 * 2**20
_MARK = "_cudal1_stable_sources"


def install(build_dir: Path) -> None:
    """Wrap ``cpp_extension.load`` (before the candidate imports it) for ``build_dir``."""
    real = cpp_extension.load
    if getattr(real, _MARK, False):
        return
    root = build_dir / "sources"

    @functools.wraps(real)
    def load(name: str, sources: str | list[str], *args: Any, **kwargs: Any) -> Any:
        moved: dict[str, str] = {}
        stable = [_stable(p, build_dir, root, moved) for p in _as_list(sources)]
        includes = kwargs.get("extra_include_paths")
        if includes:
            kwargs["extra_include_paths"] = [moved.get(_norm(p), p) for p in _as_list(includes)]
        return real(name, stable[0] if isinstance(sources, str) else stable, *args, **kwargs)

    setattr(load, _MARK, True)
    cpp_extension.load = load


def _as_list(value: str | Iterable[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def _norm(path: str) -> str:
    return os.path.realpath(os.fspath(path))


def _stable(source: str, build_dir: Path, root: Path, moved: dict[str, str]) -> str:
    """The source's stable path, or ``source`` itself where it stays where it is."""
    try:
        path = Path(_norm(source))
        if not path.is_file() or Path(_norm(str(build_dir))) in path.parents:
            return source
        folder = path.parent
        if str(folder) not in moved:
            files = _small_dir_files(folder)
            if files is None:
                return source
            moved[str(folder)] = str(_copy_once(folder, files, root))
        return str(Path(moved[str(folder)]) / path.name)
    except OSError:
        return source


def _small_dir_files(folder: Path) -> list[Path] | None:
    """The regular files under ``folder`` (relative), or None when it is not small."""
    files: list[Path] = []
    size = 0
    for dirpath, _dirs, names in os.walk(folder):
        for name in names:
            file = Path(dirpath) / name
            if file.is_symlink() or not file.is_file():
                continue
            files.append(file.relative_to(folder))
            size += file.stat().st_size
            if len(files) > MAX_DIR_FILES or size > MAX_DIR_BYTES:
                return None
    return sorted(files)


def _copy_once(folder: Path, files: list[Path], root: Path) -> Path:
    """``root/<digest>``, filled atomically (a rename) by the first process that needs it."""
    digest = hashlib.sha256()
    for rel in files:
        digest.update(str(rel).encode() + b"\0" + (folder / rel).read_bytes() + b"\0")
    dest = root / digest.hexdigest()[:24]
    if dest.is_dir():
        return dest
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".copy-", dir=root))
    for rel in files:
        (staging / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(folder / rel, staging / rel)
    try:
        staging.rename(dest)
    except OSError:  # another process got there first, with the same bytes
        shutil.rmtree(staging, ignore_errors=True)
    return dest

