"""Capture the app's screen after one real round, for the README.

Runs the real Textual app headless (``App.run_test``) on ``examples/diag_matmul.py`` at its
CPU sizes, with a replay server on the demo session's model replies and a temporary sessions
folder; presses ``n``, waits for the round's results, selects the fastest verified row and
writes the screen as plain text between the README's ``<!-- screen -->`` markers, and as SVG to
``docs/screenshot.svg``.

    python benchmarks/capture_screen.py [--no-write]   # --no-write: print the screen only
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from textual.pilot import Pilot

from cudal1_tui.config import Settings
from cudal1_tui.replay import ReplayConfig, ReplayServer
from cudal1_tui.ui.app import CudaL1App
from cudal1_tui.ui.widgets.variants import VariantTable

ROOT = Path(__file__).resolve().parents[1]
PROBLEM = ROOT / "examples" / "diag_matmul.py"
DEMO = ROOT / "examples" / "sessions" / "demo"
README = ROOT / "README.md"
SVG = ROOT / "docs" / "screenshot.svg"
SIZE = (130, 40)
BLOCK = re.compile(r"<!-- screen -->.*?<!-- /screen -->", re.DOTALL)
CAPTION = ("One round on `examples/diag_matmul.py` on a CPU (its CPU sizes, model replies "
           "replayed from `examples/sessions/demo`), the fastest row selected; captured by "
           "`python benchmarks/capture_screen.py`.")
SVG_LINK = "[The same screen in colour](docs/screenshot.svg)."


async def wait_until(pilot: Pilot[int], done: Callable[[], bool], what: str,
                     timeout: float = 600.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        await pilot.pause(0.2)


def screen_text(app: CudaL1App) -> str:
    strips = app.screen._compositor.render_strips()  # what the terminal would show
    return "\n".join(strip.text.rstrip() for strip in strips).rstrip() + "\n"


def select_best(app: CudaL1App) -> None:
    table = app.query_one(VariantTable)
    ok = [r for r in table.records.values() if r.status == "ok" and r.speedup is not None]
    if ok:
        best = max(ok, key=lambda r: r.speedup or 0.0)
        table.move_cursor(row=table.get_row_index(best.record_id))


async def capture(settings: Settings) -> tuple[str, str]:
    app = CudaL1App(PROBLEM, settings, sizes="cpu")
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.runner.engine is not None
                         and app.session.header_info.status.startswith("ready"),
                         "the session to open")
        await pilot.press("n")
        await wait_until(pilot, lambda: app.session.round_running, "the round to start", 30)
        await wait_until(pilot, lambda: not app.session.round_running, "the round's results")
        select_best(app)
        await pilot.pause(0.5)
        text, svg = screen_text(app), app.export_screenshot(title="cudal1-tui")
        await pilot.press("q")
        await wait_until(pilot, lambda: app.return_code is not None, "the app to quit", 60)
    return text, svg


def update_readme(text: str, with_svg: bool) -> None:
    readme = README.read_text(encoding="utf-8")
    if not BLOCK.search(readme):
        raise SystemExit(f"{README} has no <!-- screen --> … <!-- /screen --> block")
    link = f" {SVG_LINK}" if with_svg else ""
    block = f"<!-- screen -->\n```text\n{text}```\n\n{CAPTION}{link}\n<!-- /screen -->"
    README.write_text(BLOCK.sub(lambda _: block, readme, count=1), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-write", action="store_true", help="print the screen only")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="cudal1-capture-") as tmp, \
            ReplayServer(ReplayConfig(source=DEMO, chunk_chars=64)) as server:
        settings = Settings(base_url=server.base_url, device="cpu",
                            sessions_dir=str(Path(tmp) / "sessions"),
                            build_dir=str(Path(tmp) / "build"), timing_budget_s=3.0)
        text, svg = asyncio.run(capture(settings))
    sys.stdout.write(text)
    if not args.no_write:
        SVG.parent.mkdir(parents=True, exist_ok=True)
        SVG.write_text(svg, encoding="utf-8")
        update_readme(text, with_svg=True)
        print(f"wrote {README.name} and {SVG.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
