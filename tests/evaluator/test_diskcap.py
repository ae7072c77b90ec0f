"""The parent's disk watch counts what a candidate wrote, and what it cannot count it does not
take as empty: trees past PATH_MAX, trees too deep to walk, too many entries, dirs it cannot
read. Real dirs on this disk; no candidate process needed for the scan itself."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cudal1_evaluator.parent import diskcap


def _deep(root: Path, levels: int, name: str = "d" * 200) -> int:
    """A chain of ``levels`` dirs under ``root``, built by fds (its path passes PATH_MAX); a
    1 MB file at the bottom. The fd of the bottom dir is closed; returns the path length."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(levels):
        os.mkdir(name, dir_fd=fd)
        sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = sub
    out = os.open("blob", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
    os.write(out, os.urandom(2**20))
    os.close(out)
    os.close(fd)
    return len(str(root)) + levels * (len(name) + 1)


def test_a_file_below_path_max_is_counted(tmp_path: Path) -> None:
    """Round 14: a path walk went blind past 4096 characters; the fd walk does not."""
    length = _deep(tmp_path, 30)
    assert length > 4096
    use = diskcap.disk_use(tmp_path)
    assert use.mb >= 1.0 and not use.blind, use
    assert use.entries == 31  # 30 dirs and the file


def test_a_tree_deeper_than_the_walk_is_blind_not_empty(tmp_path: Path) -> None:
    _deep(tmp_path, diskcap.DEPTH_MOST + 5, name="d")
    use = diskcap.disk_use(tmp_path)
    assert use.mb < 1.0  # the file lies past where the walk goes
    assert list(use.blind.values()) == [f"a directory tree deeper than {diskcap.DEPTH_MOST} levels"]


def test_the_watch_names_what_it_could_not_count(tmp_path: Path) -> None:
    own = tmp_path / "own"
    own.mkdir()
    watch = diskcap.DiskWatch([own], [], limit_mb=100)
    assert watch.over() == ""
    (own / "big").write_bytes(os.urandom(2 * 2**20))
    assert diskcap.DiskWatch([own], [], limit_mb=1).over() == "more than 1 MB"
    _deep(own, diskcap.DEPTH_MOST + 1, name="x")
    assert "deeper than" in watch.over()
    assert "deeper than" in diskcap.message(watch.over())


def test_empty_entries_count_past_their_cap(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A million empty files cost inodes, not bytes: past ``ENTRIES_MOST`` the watch stops."""
    monkeypatch.setattr(diskcap, "ENTRIES_MOST", 50)
    for i in range(60):
        (tmp_path / f"e{i}").touch()
    assert diskcap.DiskWatch([tmp_path], [], limit_mb=100).over() == "more than 50 files and dirs"


def test_a_shared_dir_counts_growth_and_old_blind_spots_are_not_news(tmp_path: Path) -> None:
    shared = tmp_path / "cache"
    shared.mkdir()
    (shared / "old").write_bytes(os.urandom(3 * 2**20))
    _deep(shared, diskcap.DEPTH_MOST + 1, name="o")  # left by an earlier candidate
    watch = diskcap.DiskWatch([], [shared], limit_mb=2)
    assert watch.over() == ""  # 3 MB and a blind spot, both there before the child
    (shared / "new").write_bytes(os.urandom(3 * 2**20))
    assert watch.over() == "more than 2 MB"
    (shared / "new").unlink()
    (shared / "fresh").mkdir()
    _deep(shared / "fresh", diskcap.DEPTH_MOST, name="n")
    assert "deeper than" in watch.over()


def test_directories_count_for_their_own_blocks(tmp_path: Path) -> None:
    big = tmp_path / "wide"
    big.mkdir()
    for i in range(400):  # a dir's own blocks grow with its entries
        (big / f"{i:0200d}").symlink_to("x")
    use = diskcap.disk_use(tmp_path)
    assert use.bytes >= os.stat(big).st_blocks * 512 > 0


@pytest.mark.skipif(os.geteuid() == 0, reason="running as root: permission bits do not hide a dir")
def test_a_dir_the_evaluator_cannot_read_is_blind(tmp_path: Path) -> None:
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / "blob").write_bytes(os.urandom(2**20))
    hidden.chmod(0)
    try:
        watch = diskcap.DiskWatch([tmp_path], [], limit_mb=100)
        assert "cannot read" in watch.over()
    finally:
        hidden.chmod(0o700)
