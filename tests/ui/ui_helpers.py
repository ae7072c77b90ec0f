"""Helpers for the UI tests: the terminal size, engine settings, waiting, reading widgets."""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from textual.pilot import Pilot
from textual.widgets import Static

from cudal1_tui.config import Settings

SIZE = (160, 50)


def engine_settings(tmp_path: Path, base_url: str) -> Settings:
    """Real engine on the CPU with small budgets; sessions and builds under tmp_path."""
    return Settings(
        base_url=base_url, device="cpu", sessions_dir=str(tmp_path / "sessions"),
        build_dir=str(tmp_path / "build"), use_builtin=False, candidates_per_round=1,
        correctness_trials=2, timing_budget_s=0.3, eval_timeout_s=120, connect_timeout_s=2,
        retries=0, request_timeout_s=60,
    )


async def wait_until(pilot: Pilot[int], predicate: Callable[[], bool], what: str,
                     timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        await pilot.pause(0.1)


def plain(widget: Static) -> str:
    """What a Static (or Label) shows, as plain text."""
    console = Console(width=200, record=True, color_system=None, file=io.StringIO())
    console.print(widget.content)
    return console.export_text()
