"""The CLI's first hour: broken files stop before the app, @last and --resume, prune."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from store_builders import REFERENCE, populated_session

from cudal1_tui.cli.main import main
from cudal1_tui.cli.session_refs import resolve_ref
from cudal1_tui.config import Settings
from cudal1_tui.errors import SessionError
from cudal1_tui.store import Session, SessionMeta

ROOT = Path(__file__).resolve().parents[2]
HERE = {**os.environ, "PYTHONPATH": str(ROOT)}
BROKEN = ROOT / "tests" / "data" / "broken_problems"


@pytest.fixture(autouse=True)
def no_global_git_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")


@pytest.mark.parametrize(("name", "expected"), [
    ("syntax_error.py", "syntax_error.py:6:5: error: syntax error"),
    ("no_get_inputs.py", "no_get_inputs.py: error: `def get_inputs()` is missing"),
])
def test_a_broken_problem_stops_before_the_app(name: str, expected: str) -> None:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "cudal1_tui", str(BROKEN / name)], env=HERE,
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    print(f"reported in {time.monotonic() - started:.1f} s")
    assert done.returncode == 1
    assert expected in done.stderr and "cudal1-tui inspect" in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


def _empty(root: Path, name: str) -> Session:
    problem = root.parent / f"{name}.py"
    problem.write_text(REFERENCE)
    later = SessionMeta(created_at="2099-01-01T00:00:00+00:00")  # newer than any other
    session = Session.create(problem, REFERENCE, Settings(), later, root=root)
    session.close()
    return session


def test_at_last_names_the_newest_session_of_a_problem(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    with pytest.raises(SessionError, match="no session"):
        resolve_ref("@last", root)
    full, _ = populated_session(root)
    full.close()
    other = _empty(root, "other_problem")
    assert resolve_ref("@last", root) == str(other.path)
    assert resolve_ref("@last", root, problem=full.meta.problem_name) == str(full.path)
    assert resolve_ref(full.id, root) == full.id  # anything else passes through


def test_prune_removes_empty_sessions_dry_run_first(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "sessions"
    full, _ = populated_session(root)
    full.close()
    empty = _empty(root, "nothing_tried")
    flags = ["--sessions-dir", str(root)]
    assert main(["sessions", "prune", "--dry-run", *flags]) == 0
    assert f"would remove {empty.id} (empty)" in capsys.readouterr().out
    assert empty.path.is_dir()
    assert main(["sessions", "prune", *flags]) == 0
    assert not empty.path.exists() and full.path.is_dir()
    assert main(["sessions", "prune", "--older-than", "0", *flags]) == 0
    assert not full.path.exists()
    assert "older than 0 days" in capsys.readouterr().out


def test_prune_keeps_a_session_in_use(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "sessions"
    problem = tmp_path / "busy.py"
    problem.write_text(REFERENCE)
    with Session.create(problem, REFERENCE, Settings(), root=root) as session:
        assert main(["sessions", "prune", "--sessions-dir", str(root)]) == 0
        assert session.path.is_dir()
    assert "in use" in capsys.readouterr().out


@pytest.mark.parametrize("command", [["show", "@last"], ["sessions"]])
def test_show_and_sessions_keep_whole_words_at_80_columns(tmp_path: Path,
                                                          command: list[str]) -> None:
    """Issue 23: at 80 columns no column wraps into 4-character pieces."""
    session, _ = populated_session(tmp_path / "sessions")
    session.close()
    env = {**HERE, "COLUMNS": "80"}
    done = subprocess.run([sys.executable, "-m", "cudal1_tui", *command, "--sessions-dir",
                           str(tmp_path / "sessions")], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), done.stdout
    rows = [line for line in lines if line.startswith("│")]
    assert rows and session.id in done.stdout
    if command[0] == "sessions":
        assert any(session.id in line for line in rows), done.stdout
    words = ("builtin:torch_compile", "incorrect", "accepted") if command[0] == "show" else ()
    for word in words:
        assert any(word in line for line in rows), (word, done.stdout)
    assert not any(line.startswith("│") and set(line) <= set("│ ") for line in rows)


def test_doctor_keeps_paths_whole_at_80_columns(tmp_path: Path) -> None:
    config = tmp_path / "a-rather-long-directory-name-for-the-config" / "config.toml"
    env = {**HERE, "COLUMNS": "80", "CUDAL1_CONFIG": str(config)}
    done = subprocess.run([sys.executable, "-m", "cudal1_tui", "doctor", "--device", "cpu",
                           "--base-url", "http://127.0.0.1:9/v1"], env=env,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    assert str(config) in done.stdout.replace("\n", "")
    assert "…" not in done.stdout
