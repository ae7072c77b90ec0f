"""Snapshots of the main states, fed with a recorded session.

Timing-derived numbers come from the recorded events and records, never from this
machine's clock, so the pictures are the same on every run. The live behaviour
behind each state is covered by the Pilot tests driven by the real engine.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import ui_recorded as recorded
from textual.pilot import Pilot
from ui_helpers import SIZE

from cudal1_tui.config import Settings
from cudal1_tui.engine import events as ev
from cudal1_tui.ui.app import CudaL1App
from cudal1_tui.ui.messages import EngineEventPosted, RecordsLoaded
from cudal1_tui.ui.screens.export_screen import ExportScreen
from cudal1_tui.ui.widgets.detail import DetailPane

SnapCompare = Callable[..., bool]


def _app() -> CudaL1App:
    app = CudaL1App(Path("relu2.py"), Settings(), autostart=False)
    app.session.reference_source = recorded.REFERENCE
    app.animation_level = "none"  # the indeterminate progress bar would move with the clock
    return app


async def _feed(pilot: Pilot[Any], events: Iterable[ev.EngineEvent]) -> None:
    for event in events:
        pilot.app.post_message(EngineEventPosted(event))
    await pilot.pause()


async def _results(pilot: Pilot[Any]) -> None:
    await _feed(pilot, [*recorded.opening_events(), *recorded.result_events()])
    pilot.app.post_message(RecordsLoaded(recorded.records()))
    await pilot.pause()  # the round's fastest clean row, the CUDA variant, is selected


def test_first_start(snap_compare: SnapCompare) -> None:
    async def opened(pilot: Pilot[Any]) -> None:
        await _feed(pilot, recorded.opening_events())

    assert snap_compare(_app(), terminal_size=SIZE, run_before=opened)


def test_streaming(snap_compare: SnapCompare) -> None:
    async def streaming(pilot: Pilot[Any]) -> None:
        await _feed(pilot, [*recorded.opening_events(), *recorded.streaming_events()])
        pilot.app.query_one(DetailPane).active = "tab-output"
        await pilot.pause()

    assert snap_compare(_app(), terminal_size=SIZE, run_before=streaming)


def test_results(snap_compare: SnapCompare) -> None:
    assert snap_compare(_app(), terminal_size=SIZE, run_before=_results)


def test_error_banner(snap_compare: SnapCompare) -> None:
    async def server_down(pilot: Pilot[Any]) -> None:
        await _feed(pilot, [*recorded.opening_events(), ev.RoundStarted(1, 0), ev.EngineError(
            "the model server at http://127.0.0.1:8000/v1 is not reachable (connection refused)",
            "start a model server (vLLM, SGLang, llama.cpp, Ollama) and set OPENAI_BASE_URL", 1,
        ), ev.RoundFinished(1, None)])

    assert snap_compare(_app(), terminal_size=SIZE, run_before=server_down)


def test_help(snap_compare: SnapCompare) -> None:
    assert snap_compare(_app(), terminal_size=SIZE, press=["question_mark"])


def test_export_dialog(snap_compare: SnapCompare) -> None:
    async def dialog(pilot: Pilot[Any]) -> None:
        await _results(pilot)
        await pilot.app.push_screen(ExportScreen("20260101-000000_relu2_demo"))
        await pilot.pause()

    assert snap_compare(_app(), terminal_size=SIZE, run_before=dialog)


def test_results_at_80x24(snap_compare: SnapCompare) -> None:
    """The narrow layout: table above the tabs, least important columns dropped, ? help shown."""
    assert snap_compare(_app(), terminal_size=(80, 24), run_before=_results)


def test_builtin_only_notice(snap_compare: SnapCompare) -> None:
    async def no_server(pilot: Pilot[Any]) -> None:
        await _feed(pilot, [*recorded.opening_events(), ev.EngineError(
            "no model: the model server at http://127.0.0.1:8000/v1 is not reachable "
            "(connection refused); running the built-in proposer only",
            "start a model server (vLLM, SGLang, llama.cpp, Ollama) and set OPENAI_BASE_URL",
            0, True)])

    assert snap_compare(_app(), terminal_size=SIZE, run_before=no_server)
