"""End to end: the installed ``cudal1-tui`` executable in tmux, keys sent, screen read."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from ui_helpers import engine_settings

from cudal1_tui.replay import ReplayServer

TMUX = shutil.which("tmux")
EXE = shutil.which("cudal1-tui")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(TMUX is None, reason="tmux is not installed"),
    pytest.mark.skipif(EXE is None, reason="cudal1-tui is not on PATH (pip install -e .)"),
]
RESULT_ROW = re.compile(r"1\.0\s+model\s+ok\s+\d+\.\d+×")


class Tmux:
    """A private tmux server (its own socket) whose windows start at 160×50.

    ``default-size`` matters: a pane first made at 80×24 and resized at once can reach the
    app before its resize handler is installed, and the app would keep drawing 80×24.
    """

    def __init__(self, config: Path) -> None:
        self.socket = f"cudal1-test-{uuid.uuid4().hex[:8]}"
        config.write_text("set -g default-size 160x50\n", encoding="utf-8")
        self.config = config

    def __call__(self, *args: str) -> str:
        command = [str(TMUX), "-L", self.socket, "-f", str(self.config), *args]
        out = subprocess.run(command, capture_output=True,
                             text=True, timeout=30, check=True)
        return out.stdout

    def screen(self) -> str:
        return self("capture-pane", "-p", "-t", "app")

    def wait_for(self, pattern: re.Pattern[str] | str, what: str, timeout: float = 120) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            screen = self.screen()
            if re.search(pattern, screen):
                return screen
            time.sleep(0.3)
        raise AssertionError(f"timed out waiting for {what}; the screen:\n{self.screen()}")


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[Tmux]:
    session = Tmux(tmp_path / "tmux.conf")
    yield session
    subprocess.run([str(TMUX), "-L", session.socket, "kill-server"], capture_output=True,
                   timeout=30, check=False)


def _config(tmp_path: Path, base_url: str) -> Path:
    settings = engine_settings(tmp_path, base_url)
    names = ("correctness_trials", "timing_budget_s", "eval_timeout_s", "build_dir",
             "connect_timeout_s", "retries")
    lines = [f"{name} = {json.dumps(getattr(settings, name))}" for name in names]
    path = tmp_path / "config.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_installed_app_runs_a_round_and_saves_on_quit(
    tmux: Tmux, problem_file: Path, replay: ReplayServer, tmp_path: Path
) -> None:
    sessions = tmp_path / "sessions"
    # The test run exports COLUMNS=80/LINES=24, which Textual would obey over the pane's size.
    command = (
        f"env -u COLUMNS -u LINES {EXE} {problem_file} --device cpu --base-url {replay.base_url}"
        f" --no-builtin --candidates 1 --sessions-dir {sessions}"
        f" --config {_config(tmp_path, replay.base_url)}"
        "; echo EXIT=$?; sleep 120"
    )
    tmux("new-session", "-d", "-s", "app", "-x", "160", "-y", "50", command)
    tmux.wait_for("ready", "the session to open")
    tmux("send-keys", "-t", "app", "n")
    screen = tmux.wait_for(RESULT_ROW, "a result row")
    assert "Traceback" not in screen
    tmux("send-keys", "-t", "app", "q")
    tmux.wait_for("EXIT=0", "the app to exit cleanly", timeout=60)
    (session_dir,) = [p for p in sessions.iterdir() if p.is_dir()]
    rows = [json.loads(line) for line in (session_dir / "trace.jsonl").read_text().splitlines()]
    assert [r["status"] for r in rows if r.get("kind") == "candidate"] == ["ok"]
