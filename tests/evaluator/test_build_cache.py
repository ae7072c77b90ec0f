"""The keyed build dir outlives any builder: a build killed mid-compile leaves torch's lock
file, which the next child removes (with the half-written build) unless a live child uses the
dir."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from cudal1_evaluator.parent import build_cache

SOURCE = "import torch\n"


@pytest.fixture(autouse=True)
def _restore_caches_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("TORCH_EXTENSIONS_DIR", "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR"):
        monkeypatch.delenv(var, raising=False)  # prepare() sets them; restored after


def _keyed(root: Path) -> Path:
    key = build_cache.build_key(SOURCE, "t", "a")
    return build_cache.source_dir(root, SOURCE) / key


def _interrupted_build(root: Path, name: str = "ext") -> Path:
    """What a builder killed mid-compile leaves: torch's baton, a half-written object and
    the marker of an earlier complete build."""
    ext = _keyed(root) / "torch_extensions" / name
    ext.mkdir(parents=True)
    (ext / build_cache.TORCH_BATON).touch()
    (ext / "kernel.o").write_bytes(b"\x7fELF truncated")
    (_keyed(root) / build_cache.MARKER).write_text("ok\n")
    return ext


def test_a_dead_builders_lock_is_removed_with_its_build(tmp_path: Path) -> None:
    ext = _interrupted_build(tmp_path)
    done = _keyed(tmp_path) / "torch_extensions" / "done"
    done.mkdir()
    (done / "done.so").write_bytes(b"ok")
    bdir = build_cache.prepare(str(tmp_path), SOURCE, "t", "a")
    assert not ext.exists(), "the interrupted build (lock and half-written object) stays"
    assert (done / "done.so").exists(), "a finished build beside it was removed"
    assert bdir.interrupted == ["ext"] and not bdir.cached
    assert "interrupted" in bdir.note() and "ext" in bdir.note()
    assert os.environ["TORCH_EXTENSIONS_DIR"] == str(bdir.path / "torch_extensions")


def test_a_baton_in_a_build_directory_of_the_candidates_own_is_removed(tmp_path: Path) -> None:
    own = _keyed(tmp_path) / "mine" / "ext"  # load_inline(build_directory=...) in the dir
    own.mkdir(parents=True)
    (own / build_cache.TORCH_BATON).touch()
    (own / "ext.so").write_bytes(b"ok")
    bdir = build_cache.prepare(str(tmp_path), SOURCE, "t", "a")
    assert not (own / build_cache.TORCH_BATON).exists() and bdir.interrupted == ["ext"]


def test_a_live_childs_build_in_progress_is_left_alone(tmp_path: Path) -> None:
    ext = _interrupted_build(tmp_path)
    users = os.open(_keyed(tmp_path) / build_cache.USERS, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(users, fcntl.LOCK_SH)  # another child, building now
        bdir = build_cache.prepare(str(tmp_path), SOURCE, "t", "a")
    finally:
        os.close(users)
    assert (ext / build_cache.TORCH_BATON).exists()
    assert bdir.interrupted == [] and bdir.cached and bdir.note() == ""


def test_the_claim_is_held_so_a_later_child_leaves_this_ones_build_alone(
        tmp_path: Path) -> None:
    bdir = build_cache.prepare(str(tmp_path), SOURCE, "t", "a")
    users = os.open(bdir.path / build_cache.USERS, os.O_RDWR)
    try:
        with pytest.raises(BlockingIOError):  # what the next child tries first
            fcntl.flock(users, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(users)
