"""The first hour's pitfalls (issue 13), each driven through the app with Pilot.

Fed with a recorded session: best row after a round, confirmation before a doubtful
accept, colours below 1×, one baseline in the header, the palette, a layout that
degrades at 80×24, the info notice without a model.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import ui_recorded as recorded
from rich.text import Text
from textual.command import CommandPalette
from textual.widgets import Footer, Static
from ui_helpers import SIZE, plain, wait_until

from cudal1_evaluator.schema import Result, TimingSummary
from cudal1_tui.config import Settings
from cudal1_tui.engine import events as ev
from cudal1_tui.records import CandidateRecord
from cudal1_tui.ui.app import CudaL1App
from cudal1_tui.ui.messages import EngineEventPosted, RecordsLoaded
from cudal1_tui.ui.screens.confirm_screen import ConfirmScreen
from cudal1_tui.ui.widgets.banner import ErrorBanner
from cudal1_tui.ui.widgets.header import HeaderBar
from cudal1_tui.ui.widgets.variants import VariantTable


def _app(**settings: object) -> CudaL1App:
    app = CudaL1App(Path("relu2.py"), Settings(**settings), autostart=False)  # type: ignore[arg-type]
    app.session.reference_source = recorded.REFERENCE
    return app


def _slow(record: CandidateRecord) -> CandidateRecord:
    """A verified variant slower than the reference (0.35×)."""
    timing = {"reference": TimingSummary(median_ms=0.35, p10_ms=0.34, p90_ms=0.36, spread=0.06),
              "candidate": TimingSummary(median_ms=1.0, p10_ms=0.98, p90_ms=1.02, spread=0.04)}
    result = Result(status="ok", correct=True, speedup=0.35, timing=timing)
    return replace(record, record_id="r3s0", round=3, slot=0, speedup=0.35, result=result)


def _records() -> list[CandidateRecord]:
    records = recorded.records()
    return [*records, _slow(records[0])]


async def _round(app: CudaL1App, records: list[CandidateRecord]) -> None:
    for event in [*recorded.opening_events(), *recorded.result_events()]:
        app.post_message(EngineEventPosted(event))
    app.post_message(RecordsLoaded(records))


async def test_best_row_is_selected_after_a_round_and_slow_rows_are_red() -> None:
    app = _app()
    async with app.run_test(size=SIZE) as pilot:
        await _round(app, _records())
        table = app.query_one(VariantTable)
        await wait_until(pilot, lambda: table.row_count == 5, "rows")
        app.post_message(EngineEventPosted(ev.RoundFinished(3, 1.84)))
        app.post_message(RecordsLoaded(_records()))
        # the fastest verified, unflagged row, not the newest (0.35×) nor the flagged 9.7×
        await wait_until(pilot, lambda: table.selected_id() == "r1s1", "the best row")
        slow = table.get_row("r3s0")[table.column_keys.index("speedup")]
        assert isinstance(slow, Text) and "red" in str(slow.style)


async def test_accepting_a_slow_variant_asks_first() -> None:
    app = _app()
    async with app.run_test(size=SIZE) as pilot:
        await _round(app, _records())
        table = app.query_one(VariantTable)
        await wait_until(pilot, lambda: table.row_count == 5, "rows")
        table.move_cursor(row=table.get_row_index("r3s0"))
        await pilot.press("a")
        assert isinstance(app.screen, ConfirmScreen)
        assert "not faster than the reference (0.35×)" in plain(app.screen.query_one(
            "#confirm-body", Static))
        await pilot.press("escape")
        assert not isinstance(app.screen, ConfirmScreen)


async def test_header_shows_the_reference_the_speedups_use() -> None:
    app = _app()
    async with app.run_test(size=SIZE) as pilot:
        await _round(app, _records())
        header = app.query_one(HeaderBar)
        table = app.query_one(VariantTable)
        await wait_until(pilot, lambda: table.row_count == 5, "rows")
        table.move_cursor(row=table.get_row_index("r3s0"))
        # the probe's estimate (500 µs) gives way to the reference the selected row's speedup
        # divides by, and the header says whose it is (issue 23)
        await wait_until(pilot, lambda: "reference (row 3.0): eager 350.0 µs"
                         in header.render().plain, "the timed reference", timeout=10)
        assert "torch.compile —" in header.render().plain  # no candidate's time stands in for it


async def test_the_palette_lists_the_app_actions() -> None:
    app = _app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+p")
        assert isinstance(app.screen, CommandPalette)
        await pilot.press(*"sort by speedup")
        await wait_until(pilot, lambda: "sort by speedup" in str(
            app.screen.query("CommandList").first().get_option_at_index(0).prompt), "a hit")


async def test_80x24_keeps_speedup_decision_and_help_visible() -> None:
    app = _app()
    async with app.run_test(size=(80, 24)) as pilot:
        await _round(app, _records())
        table = app.query_one(VariantTable)
        await wait_until(pilot, lambda: table.row_count == 5, "rows")
        assert {"speedup", "status", "decision"} <= set(table.column_keys)
        assert "error" not in table.column_keys  # the least important went first
        footer = app.query_one(Footer)

        def footer_keys() -> list[str]:
            return [b.key for b in footer.query("FooterKey")]  # type: ignore[attr-defined]

        # the footer recomposes its keys after the bindings change: wait for it, then look
        await wait_until(pilot, lambda: "question_mark" in footer_keys(), "the footer's keys")
        assert "question_mark" in footer_keys() and "q" in footer_keys()
        assert all(k.region.right <= 80 for k in footer.query("FooterKey"))


async def test_no_model_with_builtins_is_an_info_notice_not_an_error() -> None:
    for use_builtin, expected in ((True, "-info"), (False, None)):
        app = _app(use_builtin=use_builtin)
        async with app.run_test(size=SIZE) as pilot:
            app.post_message(EngineEventPosted(ev.EngineError(
                "no model: the server at http://127.0.0.1:9/v1 is not reachable",
                "start a model server and set OPENAI_BASE_URL", 0, True)))
            banner = app.query_one(ErrorBanner)
            await wait_until(pilot, lambda b=banner: bool(b.display), "the banner")
            assert banner.has_class("-info") == (expected == "-info")
            text = plain(banner.query_one("#banner-message", Static))
            assert text.startswith("info" if use_builtin else "error")
