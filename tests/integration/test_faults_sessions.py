"""One damaged session among healthy ones: `sessions`, `show` and `export` give what is intact
with a warning naming the damage; resume repairs what it can or says clearly why it cannot.

Sessions are real (git repositories, traces) built through the Session API; the damage is
what a user's disk or hands do: a lost git object, a dead writer's index.lock, a deleted
session.json or candidates/ folder, a read-only sessions folder.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from store_builders import populated_session, record

from cudal1_tui.cli.main import main
from cudal1_tui.errors import SessionError
from cudal1_tui.store import Session

Damage = Callable[[Path], None]
ROOT = Path(__file__).resolve().parents[2]


def _lose_head_commit_object(path: Path) -> None:
    sha = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True,
                         text=True, check=True).stdout.strip()
    (path / ".git" / "objects" / sha[:2] / sha[2:]).unlink()


def _drop_meta(path: Path) -> None:
    (path / "session.json").unlink()


def _drop_candidates(path: Path) -> None:
    shutil.rmtree(path / "candidates")


DAMAGE: dict[str, Damage] = {
    "missing git object": _lose_head_commit_object,
    "deleted session.json": _drop_meta,
    "deleted candidates": _drop_candidates,
}


def _two_sessions(root: Path) -> tuple[Path, Path, int]:
    healthy, _ = populated_session(root)
    healthy.close()
    time.sleep(1.1)  # distinct created_at / folder names
    damaged, records = populated_session(root)
    damaged.close()
    return healthy.path, damaged.path, len(records)


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("case", list(DAMAGE), ids=list(DAMAGE))
def test_read_commands_give_what_is_intact(tmp_path: Path, case: str,
                                           capsys: pytest.CaptureFixture[str],
                                           caplog: pytest.LogCaptureFixture) -> None:
    root = tmp_path / "sessions"
    healthy, damaged, count = _two_sessions(root)
    DAMAGE[case](damaged)
    where = ("--sessions-dir", str(root))

    code, out, _ = _cli(capsys, "sessions", "--json", *where)
    assert code == 0
    listed = {row["folder"]: row for row in json.loads(out)}
    assert set(listed) == {str(healthy), str(damaged)}
    assert listed[str(damaged)]["candidates"] == count
    if case != "deleted candidates":  # the trace holds every candidate: nothing to warn of
        assert listed[str(damaged)]["warnings"] and not listed[str(healthy)]["warnings"]
        assert any(damaged.name in r.getMessage() for r in caplog.records)

    code, out, _ = _cli(capsys, "show", str(damaged), "--json", *where)
    assert code == 0
    shown = json.loads(out)
    assert len(shown["candidates"]) == count
    if case != "deleted candidates":
        assert shown["warnings"]

    target = tmp_path / "out.jsonl"
    code, _, err = _cli(capsys, "export", str(damaged), str(healthy), "--format", "jsonl",
                        "-o", str(target), *where)
    assert code == 0, err
    rows = target.read_text().splitlines()
    assert len(rows) == 2 * count  # every record of both sessions


def test_resume_restores_candidate_files_and_session_json(tmp_path: Path) -> None:
    _, damaged, count = _two_sessions(tmp_path / "sessions")
    _drop_candidates(damaged)
    _drop_meta(damaged)
    with Session.open(damaged) as session:
        assert len(session.records()) == count
        assert any("session.json" in w for w in session.warnings)
        assert any("restored from the trace" in w for w in session.warnings)
        session.append_candidate(record(session, 3, 0))  # later records are not lost
    assert len(list((damaged / "candidates").iterdir())) == count + 1
    assert (damaged / "session.json").is_file()
    with Session.open(damaged, readonly=True) as again:
        assert len(again.records()) == count + 1 and not again.warnings


def test_stale_index_lock_of_a_dead_writer_is_removed(tmp_path: Path) -> None:
    _, damaged, _ = _two_sessions(tmp_path / "sessions")
    lock = damaged / ".git" / "index.lock"
    lock.write_text("")
    old = time.time() - 60
    os.utime(lock, (old, old))
    with Session.open(damaged) as session:
        best = session.best()
        assert best is not None
        session.undo()
        sha = session.accept(best.record_id)  # an accept commits through git
    assert sha and not lock.exists()
    assert any("index.lock" in n for n in session.history.notes)


def test_resume_with_a_lost_git_object_says_what_is_intact(tmp_path: Path) -> None:
    _, damaged, _ = _two_sessions(tmp_path / "sessions")
    _lose_head_commit_object(damaged)
    with pytest.raises(SessionError) as raised:
        Session.open(damaged).close()
    assert "git" in raised.value.message and "show" in raised.value.fix


def test_resume_on_a_read_only_sessions_dir_says_so(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    _, damaged, _ = _two_sessions(root)
    (damaged / "session.lock").unlink()
    for path in (damaged, root):
        path.chmod(0o555)
    try:
        if os.access(damaged, os.W_OK):
            pytest.skip("running as root: permission bits do not make a folder read-only")
        with pytest.raises(SessionError) as raised:
            Session.open(damaged).close()
        assert "cannot be written" in raised.value.message
        assert "writable" in raised.value.fix
        with Session.open(damaged, readonly=True) as session:  # reading still works
            assert session.records()
    finally:
        for path in (root, damaged):
            path.chmod(0o755)


def test_a_session_in_use_is_refused_before_the_probe(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    session, _ = populated_session(root)  # held open (locked) by this process
    try:
        done = subprocess.run(
            [sys.executable, "-m", "cudal1_tui", "run", session.meta.problem_path, "--headless",
             "--resume", session.id, "--sessions-dir", str(root), "--device", "auto"],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
            env={**os.environ, "PYTHONPATH": str(ROOT),
                 "CUDAL1_CONFIG": str(tmp_path / "absent.toml")}, cwd=tmp_path)
    finally:
        session.close()
    assert done.returncode == 1, done.stderr
    assert "in use by another cudal1-tui process" in done.stderr
    assert "probing" not in done.stderr and "Traceback" not in done.stderr
