"""Snapshots of the main states, driven by the real engine on the CPU.

The engine evaluates a tiny CPU problem with the built-in proposer on, and the local
replay server answers as the model. The app runs in its "masked measurements" mode
(``DisplayOptions``), so every clock-derived number is a fixed placeholder and the
session id a fixed label: the pictures do not depend on this machine's speed or clock.
Statuses, sources, flags, diffs, code, analysis and key hints are the real ones.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import ui_problems as problems
from textual.pilot import Pilot
from textual.widgets import Log
from ui_helpers import SIZE, engine_settings, wait_until

from cudal1_tui.replay import ReplayConfig, ReplayServer, Reply
from cudal1_tui.replay.openai_wire import plan_choice, stream_pieces
from cudal1_tui.ui.app import CudaL1App
from cudal1_tui.ui.baseline import header_reference
from cudal1_tui.ui.display import DisplayOptions
from cudal1_tui.ui.screens.export_screen import ExportScreen
from cudal1_tui.ui.screens.help_screen import HelpScreen
from cudal1_tui.ui.widgets.banner import ErrorBanner
from cudal1_tui.ui.widgets.detail import DetailPane
from cudal1_tui.ui.widgets.output import ModelOutput
from cudal1_tui.ui.widgets.variants import VariantTable

SnapCompare = Callable[..., bool]

pytestmark = pytest.mark.timeout(600)

MASKED = DisplayOptions(mask_measurements=True, session_label="snapshot-session")
CHUNK_CHARS = 40
HANG_S = 60.0  # the streamed reply stops half-way for this long: the picture's moment
REPLY = Reply(problems.REPLY, problems.REASONING)
# Port 9 (discard) on the loopback: nothing listens there, and the banner names a fixed URL.
CLOSED_URL = "http://127.0.0.1:9/v1"


@pytest.fixture
def hanging_replay() -> Iterator[ReplayServer]:
    """Streams the first half of the reply, then goes silent: a stream frozen mid-way."""
    config = ReplayConfig(replies=(REPLY,), chunk_chars=CHUNK_CHARS, latency_s=0.02,
                          hang_requests=(1,), hang_s=HANG_S)
    with ReplayServer(config) as server:
        yield server


def _streamed_before_hang() -> str:
    """The content the replay server sends before its hang (it hangs at half the pieces)."""
    pieces = stream_pieces([plan_choice(REPLY, 0, "reasoning", None, False)], CHUNK_CHARS)
    return "".join(p.text for p in pieces[:len(pieces) // 2] if p.kind == "content")


def _app(problem_file: Path, tmp_path: Path, base_url: str) -> CudaL1App:
    settings = engine_settings(tmp_path, base_url)
    settings.use_builtin = True
    app = CudaL1App(problem_file, settings, sizes="cpu", display_options=MASKED)
    app.animation_level = "none"  # the indeterminate progress bar would move with the clock
    return app


def _settled(app: CudaL1App) -> bool:
    return all(worker.is_finished for worker in app.workers)


async def _opened(pilot: Pilot[Any]) -> None:
    app = pilot.app
    assert isinstance(app, CudaL1App)
    await wait_until(pilot, lambda: app.runner.engine is not None
                     and app.session.header_info.status.startswith("ready") and _settled(app),
                     "the session to open")
    await pilot.pause()


async def _results(pilot: Pilot[Any]) -> None:
    app = pilot.app
    assert isinstance(app, CudaL1App)
    await _opened(pilot)
    await pilot.press("n")
    table = app.query_one(VariantTable)
    await wait_until(pilot, lambda: table.row_count == 2 and not app.session.round_running
                     and _settled(app), "the round's two results", timeout=300)
    await pilot.pause()
    statuses = {r.source: r.status for r in table.records.values()}
    assert statuses == {"builtin:torch-compile-default": "ok", "model": "ok"}, statuses
    compiled = next(r for r in table.records.values() if r.source.startswith("builtin:"))
    # the header's torch.compile time is the reference under torch.compile, never the built-in
    # torch.compile candidate's own time (one baseline everywhere)
    # the header's reference is the one the selected row's speedup divides by, and says so
    selected = app.session.selected_record()
    assert selected is not None
    shown = header_reference(selected, list(table.records.values()))
    assert shown is not None and app.session.header_info.reference_label == shown.label
    assert app.session.header_info.reference_ms == shown.eager_ms
    assert app.session.header_info.torch_compile_ms == shown.torch_compile_ms
    measured = compiled.result.timing.get("torch_compile")
    if selected is compiled:
        assert shown.torch_compile_ms == (measured.median_ms if measured else None)
    # the app selects the faster row: two speedups this close swap places run to run
    model = next(r for r in table.records.values() if r.source == "model")
    table.move_cursor(row=table.get_row_index(model.record_id))
    await wait_until(pilot, lambda: table.selected_id() == model.record_id == getattr(
        app.session.selected_record(), "record_id", None), "the model's row selected")
    await pilot.pause()


def test_first_start(snap_compare: SnapCompare, problem_file: Path, tmp_path: Path,
                     replay: ReplayServer) -> None:
    app = _app(problem_file, tmp_path, replay.base_url)
    assert snap_compare(app, terminal_size=SIZE, run_before=_opened)


def test_streaming(snap_compare: SnapCompare, problem_file: Path, tmp_path: Path,
                   hanging_replay: ReplayServer) -> None:
    expected = _streamed_before_hang()

    async def streaming(pilot: Pilot[Any]) -> None:
        app = pilot.app
        assert isinstance(app, CudaL1App)
        await _opened(pilot)
        await pilot.press("n")
        content = app.query_one("#content", Log)
        await wait_until(pilot, lambda: "\n".join(content.lines) == expected
                         and app.query_one(ModelOutput).live is not None,
                         "the stream to reach the server's hang", timeout=300)
        app.query_one(DetailPane).active = "tab-output"
        await wait_until(pilot, lambda: app.query_one(VariantTable).row_count == 1
                         and _settled_but_rounds(app), "the built-in's row")
        await pilot.pause()

    app = _app(problem_file, tmp_path, hanging_replay.base_url)
    assert snap_compare(app, terminal_size=SIZE, run_before=streaming)


def _settled_but_rounds(app: CudaL1App) -> bool:
    """Every worker but the engine's (one runs the round) has finished."""
    return all(w.is_finished for w in app.workers if w.group != "engine")


def test_results(snap_compare: SnapCompare, problem_file: Path, tmp_path: Path,
                 replay: ReplayServer) -> None:
    app = _app(problem_file, tmp_path, replay.base_url)
    assert snap_compare(app, terminal_size=SIZE, run_before=_results)


def test_error_banner(snap_compare: SnapCompare, problem_file: Path, tmp_path: Path) -> None:
    with socket.socket() as probe:
        if probe.connect_ex(("127.0.0.1", 9)) == 0:
            pytest.skip("something listens on 127.0.0.1:9")

    async def server_down(pilot: Pilot[Any]) -> None:
        # With the built-in proposer on, the session opens anyway and the banner says
        # that only the built-in candidates will run.
        await _opened(pilot)
        banner = pilot.app.query_one(ErrorBanner)
        await wait_until(pilot, lambda: bool(banner.display), "the error banner")
        await pilot.pause()

    app = _app(problem_file, tmp_path, CLOSED_URL)
    assert snap_compare(app, terminal_size=SIZE, run_before=server_down)


def test_help(snap_compare: SnapCompare, problem_file: Path, tmp_path: Path,
              replay: ReplayServer) -> None:
    async def help_shown(pilot: Pilot[Any]) -> None:
        await _opened(pilot)
        await pilot.press("question_mark")
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, HelpScreen), "the help")
        await pilot.pause()

    app = _app(problem_file, tmp_path, replay.base_url)
    assert snap_compare(app, terminal_size=SIZE, run_before=help_shown)


def test_export_dialog(snap_compare: SnapCompare, problem_file: Path, tmp_path: Path,
                       replay: ReplayServer) -> None:
    async def dialog(pilot: Pilot[Any]) -> None:
        await _results(pilot)
        await pilot.press("e")
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, ExportScreen),
                         "the export dialog")
        await pilot.pause()

    app = _app(problem_file, tmp_path, replay.base_url)
    assert snap_compare(app, terminal_size=SIZE, run_before=dialog)
