"""The UI process never imports torch: only the evaluator's subprocesses do."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CODE = """
import sys
from pathlib import Path
import cudal1_tui.cli.commands.open_cmd
import cudal1_tui.ui.app
import cudal1_tui.ui.screens.export_screen, cudal1_tui.ui.screens.sessions_screen
from cudal1_tui.ui.exporting import export_session
from cudal1_tui.ui.engine_port import real_engine_factory
import cudal1_tui.engine.engine
heavy = sorted(m for m in ("torch", "triton") if m in sys.modules)
print(",".join(heavy) or "clean")
"""


def test_app_modules_do_not_import_torch() -> None:
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True,
                         timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "clean", out.stdout + out.stderr


ROUND = """
import asyncio, sys, time
from pathlib import Path
sys.path.insert(0, {tests!r})
import ui_problems as problems
from ui_helpers import engine_settings
from cudal1_tui.replay import ReplayConfig, ReplayServer, Reply
from cudal1_tui.ui.app import CudaL1App

async def main() -> None:
    config = ReplayConfig(replies=(Reply(problems.REPLY, problems.REASONING),))
    with ReplayServer(config) as server:
        tmp = Path({tmp!r})
        app = CudaL1App(problems.write_problem(tmp), engine_settings(tmp, server.base_url))
        async with app.run_test(size=(160, 50)) as pilot:
            deadline = time.monotonic() + 90
            while not app.session.header_info.status.startswith("ready"):
                assert time.monotonic() < deadline, "no session"
                await pilot.pause(0.1)
            await pilot.press("n")
            logs = app.session.log_history
            while not logs or "model: ok" not in " ".join(logs):
                assert time.monotonic() < deadline, app.session.log_history
                await pilot.pause(0.1)
            await pilot.press("q")
    print("torch" if "torch" in sys.modules else "clean")

asyncio.run(main())
"""


def test_a_whole_round_in_the_app_process_never_imports_torch(tmp_path: Path) -> None:
    code = ROUND.format(tests=str(Path(__file__).parent), tmp=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=180, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.strip().splitlines()[-1] == "clean", out.stdout
