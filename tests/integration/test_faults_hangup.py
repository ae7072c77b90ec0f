"""A terminal closed under the TUI (its tmux session killed: SIGHUP) ends the app and everything
it started: no process and no temp dir is left (issue 23). Before, the app kept running in
the background with its evaluator children, blocked drawing to the terminal that was gone."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from procs import descendants

ROOT = Path(__file__).resolve().parents[2]
TMUX = shutil.which("tmux")
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(TMUX is None, reason="tmux is not installed")]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _wait(predicate: object, what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.3)


def _temp_dirs(pid: int) -> list[Path]:
    roots = {Path("/tmp"), Path("/dev/shm")}
    return [p for root in roots if root.is_dir() for p in root.glob(f"cudal1-eval-{pid}_*")]


def test_closing_the_terminal_ends_the_app_and_its_children(tmp_path: Path) -> None:
    problem = tmp_path / "relu.py"
    problem.write_text((ROOT / "examples" / "relu.py").read_text(encoding="utf-8"))
    config = tmp_path / "tmux.conf"
    config.write_text("set -g default-size 160x50\n", encoding="utf-8")
    socket = f"cudal1-hup-{uuid.uuid4().hex[:8]}"

    def tmux(*args: str) -> str:
        return subprocess.run([str(TMUX), "-L", socket, "-f", str(config), *args],
                              capture_output=True, text=True, timeout=30, check=True).stdout

    command = (f"exec env -u COLUMNS -u LINES PYTHONPATH={ROOT} GIT_CONFIG_GLOBAL={os.devnull} "
               f"{sys.executable} -m cudal1_tui {problem} --device cpu "
               f"--sessions-dir {tmp_path / 'sessions'} --base-url http://127.0.0.1:9/v1")
    tmux("new-session", "-d", "-s", "app", command)
    try:
        app = int(tmux("list-panes", "-t", "app", "-F", "#{pane_pid}").strip())
        _wait(lambda: "ready" in tmux("capture-pane", "-p", "-t", "app"), "the session",
              180)
        tmux("send-keys", "-t", "app", "n")  # a round: evaluator children at work
        _wait(lambda: len(descendants(app)) >= 2, "evaluator children", 120)
        started = descendants(app)
        tmux("kill-session", "-t", "app")  # the terminal goes away: SIGHUP
        _wait(lambda: not _alive(app), "the app to end", 30)
        _wait(lambda: not any(_alive(p) for p in started), "its children to end", 15)
        assert _temp_dirs(app) == []
    finally:
        subprocess.run([str(TMUX), "-L", socket, "kill-server"], capture_output=True,
                       timeout=30, check=False)
