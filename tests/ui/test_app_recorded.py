"""Pilot tests of the actions that need no running engine, on a recorded session."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import ui_recorded as recorded
from textual.screen import Screen
from textual.widgets import Input, Label, Log, Static
from ui_helpers import SIZE, plain, wait_until

from cudal1_evaluator.schema import Flag, ProbeResult, TensorSpec
from cudal1_tui.config import DEFAULT_KEYS, Settings
from cudal1_tui.engine import events as ev
from cudal1_tui.ui.app import CudaL1App
from cudal1_tui.ui.messages import EngineEventPosted, RecordsLoaded
from cudal1_tui.ui.screens.confirm_screen import ConfirmScreen
from cudal1_tui.ui.screens.help_screen import HelpScreen
from cudal1_tui.ui.screens.rounds_screen import RoundsScreen
from cudal1_tui.ui.screens.session_screen import SessionScreen
from cudal1_tui.ui.widgets.banner import ErrorBanner
from cudal1_tui.ui.widgets.variants import VariantTable


def _app(**keys: str) -> CudaL1App:
    app = CudaL1App(Path("relu2.py"), Settings(keys={**DEFAULT_KEYS, **keys}), autostart=False)
    app.session.reference_source = recorded.REFERENCE
    return app


def _notes(app: CudaL1App) -> list[str]:
    return [n.message for n in app._notifications]


async def _load(app: CudaL1App, records: list | None = None) -> None:
    for event in [*recorded.opening_events(), *recorded.result_events()]:
        app.post_message(EngineEventPosted(event))
    app.post_message(RecordsLoaded(records or recorded.records()))


def _diff_title(app: CudaL1App) -> str:
    return plain(app.query_one("#diff-title", Label))


async def test_the_session_is_a_screen_under_a_thin_app() -> None:
    app = _app(next_round="x")
    async with app.run_test(size=SIZE) as pilot:
        assert isinstance(app.screen, SessionScreen) and app.screen is app.session
        assert isinstance(app.session, Screen)
        await _load(app)
        await pilot.pause()
        assert app.session.query_one(VariantTable).row_count == len(recorded.records())
        await pilot.press("question_mark")  # a global key, on the app
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        await pilot.press("x")  # the session's key, rebound through the one keymap
        assert "the session is still opening" in _notes(app)
        await pilot.press("ctrl+p")  # the palette runs a session action on the session screen
        await pilot.press(*"diff layout")
        await wait_until(pilot, lambda: "diff layout" in str(
            app.screen.query("CommandList").first().get_option_at_index(0).prompt), "a hit")
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.session.diff_layout == "split", "the split diff")


async def test_help_lists_the_keys_and_closes() -> None:
    app = _app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        keys = app.screen.query_one("#help-keys")
        rows = [tuple(str(c) for c in keys.get_row_at(i)) for i in range(keys.row_count)]
        assert ("n", "next round") in rows and ("esc", "cancel slot") in rows
        # the keys that were hard to find: layout, tabs, sorting, the palette
        for row in (("v", "diff layout"), ("]", "next tab"), ("S", "sort by speedup"),
                    ("^p", "command palette: every action by name")):
            assert row in rows
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


async def test_keys_are_rebindable_from_settings() -> None:
    app = _app(help="h", next_round="x")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("h")
        assert isinstance(app.screen, HelpScreen)
        keys = app.screen.query_one("#help-keys")
        rows = [tuple(str(c) for c in keys.get_row_at(i)) for i in range(keys.row_count)]
        assert ("x", "next round") in rows


async def test_diff_base_cycles_and_layout_toggles() -> None:
    app = _app()
    async with app.run_test(size=SIZE) as pilot:
        await _load(app)
        await wait_until(pilot, lambda: app.query_one(VariantTable).row_count == 4, "rows")
        assert "against reference · unified" in _diff_title(app)
        await pilot.press("b")
        assert "against best (1.1)" in _diff_title(app)
        await pilot.press("b")
        assert "against reference (no accepted yet)" in _diff_title(app)
        await pilot.press("b", "v")  # at 160 columns the pane is too narrow for two sides
        assert "against reference · unified (split needs a wider pane)" in _diff_title(app)
    wide = _app()
    async with wide.run_test(size=(300, 50)) as pilot:
        await _load(wide)
        await wait_until(pilot, lambda: wide.query_one(VariantTable).row_count == 4, "rows")
        await pilot.press("v")
        assert "against reference · split ·" in _diff_title(wide)


async def test_mouse_sorts_by_a_column_and_selects_a_row() -> None:
    app = _app()
    async with app.run_test(size=SIZE) as pilot:
        await _load(app)
        table = app.query_one(VariantTable)
        await wait_until(pilot, lambda: table.row_count == 4, "rows")
        speedup_x = sum(c.get_render_width(table) for c in list(table.columns.values())[:3]) + 2
        await pilot.click(VariantTable, offset=(speedup_x, 0))  # the "speedup" header
        order = [str(k.value) for k in table.rows]
        assert order == ["r2s1", "r1s1", "r1s0", "r2s0"]  # fastest first, no speedup last
        await pilot.click(VariantTable, offset=(2, 3))  # third row: r1s0
        assert app.session.selected_record() is not None
        assert app.session.selected_record().record_id == "r1s0"
        assert "- class Model(nn.Module):" in plain(app.query_one("#diff-body", Static))


async def test_accept_asks_to_confirm_when_flags_are_present() -> None:
    app = _app()
    records = recorded.records()
    warned = replace(records[0].result, flags=[Flag("tf32", "TF32 matmuls", "warn")])
    records[0] = replace(records[0], result=warned)
    async with app.run_test(size=SIZE) as pilot:
        await _load(app, records)
        table = app.query_one(VariantTable)
        await wait_until(pilot, lambda: table.row_count == 4, "rows")
        table.move_cursor(row=table.get_row_index("r1s0"))
        await pilot.press("a")
        assert isinstance(app.screen, ConfirmScreen)
        assert "tf32" in plain(app.screen.query_one("#confirm-body", Static))
        await pilot.click("#confirm-no")
        assert not isinstance(app.screen, ConfirmScreen)
        assert not app.query_one(ErrorBanner).display  # nothing reached the engine
        await pilot.press("a", "y")  # confirmed: the engine is asked (none is open here)
        await wait_until(pilot, lambda: app.query_one(ErrorBanner).display, "the banner")
        assert "no session is open" in plain(app.query_one("#banner-message", Static))


async def test_accept_refuses_unverified_variants_and_warns_without_selection() -> None:
    app = _app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("a", "r")
        assert _notes(app).count("select a variant first") == 2
        await _load(app)
        table = app.query_one(VariantTable)
        await wait_until(pilot, lambda: table.row_count == 4, "rows")
        table.move_cursor(row=table.get_row_index("r2s0"))
        await pilot.press("a")
        assert any("only verified variants" in n for n in _notes(app))
        assert not isinstance(app.screen, ConfirmScreen)


async def test_rounds_dialog_validates_and_cancels() -> None:
    app = _app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("n", "N", "e", "escape")
        notes = _notes(app)
        assert "the session is still opening" in notes and "nothing is running" in notes
        assert "no session to export yet" in notes
        app.runner._engine = object()  # type: ignore[assignment]  # only "is there one" is read
        await pilot.press("N")
        assert isinstance(app.screen, RoundsScreen)
        app.screen.query_one(Input).value = "0"
        await pilot.press("enter")
        assert "whole number" in plain(app.screen.query_one("#rounds-error", Static))
        await pilot.press("escape")
        assert not isinstance(app.screen, RoundsScreen) and not app.session.round_running
        app.runner._engine = None


async def test_quit_without_a_session_exits_at_once() -> None:
    app = _app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("q")
        await wait_until(pilot, lambda: app.return_code == 0, "the exit")


async def test_concurrent_slots_stream_without_mixing() -> None:
    app = _app()
    chunk = ev.StreamChunk
    async with app.run_test(size=SIZE) as pilot:
        for event in [ev.RoundStarted(1, 2), chunk(1, 0, "content", "slot zero says A\n"),
                      chunk(1, 1, "content", "slot one says B\n"),
                      chunk(1, 1, "reasoning", "thinking in one\n"),
                      chunk(1, 0, "content", "slot zero says C\n", tokens=9, tokens_per_s=3.0)]:
            app.post_message(EngineEventPosted(event))
        await pilot.pause()
        content = app.query_one("#content", Log)
        assert content.lines == ["slot zero says A", "slot zero says C", ""]
        title = plain(app.query_one("#output-title", Label))
        assert "slot 0" in title and "9 tokens · 3 tok/s" in title and "1 more streaming" in title
        app.post_message(EngineEventPosted(ev.CandidateFinished(1, 0, "x", "model", "ok", 1.1,
                                                                0.1)))
        await pilot.pause()
        assert content.lines == ["slot one says B", ""]
        assert app.query_one("#reasoning", Log).lines == ["thinking in one", ""]


async def test_probe_names_the_gpu_and_logs_the_inputs() -> None:
    app = _app()
    async with app.run_test(size=SIZE) as pilot:
        probe = ProbeResult(ok=True, device={"type": "cuda", "name": "NVIDIA H100"},
                            inputs=[TensorSpec(shape=[8, 16], dtype="float16")])
        app.post_message(EngineEventPosted(ev.ProbeFinished(True, "ok", 1.25, 0.9, "cuda:0",
                                                            probe, cpu_sizes=False)))
        await pilot.pause()
        assert app.session.header_info.device == "cuda:0 (NVIDIA H100)"
        assert app.session.header_info.torch_compile_ms == 0.9
        assert "inputs: (8, 16) float16" in app.session.log_history
