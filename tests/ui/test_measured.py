"""What the screen says is what was measured (issue 23), driven through the app with Pilot.

One baseline (the header names whose reference it shows, and a row's speedup is the ratio of
the two times its Logs print), confirmation for any non-win, and the layout nits: the sort
arrow, the source column's width, the p10–p90 range's ``×``, the Logs without repeats, the
settings' ``base_url``, the quit dialog's focus.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import ui_recorded as recorded
from textual.widgets import Button, Input, Static
from ui_helpers import plain, wait_until

from cudal1_evaluator.schema import Flag, Result, TimingSummary
from cudal1_tui.config import Settings
from cudal1_tui.engine import events as ev
from cudal1_tui.records import CandidateRecord
from cudal1_tui.ui.app import CudaL1App
from cudal1_tui.ui.messages import EngineEventPosted, RecordsLoaded
from cudal1_tui.ui.screens.confirm_screen import ConfirmScreen
from cudal1_tui.ui.screens.settings_screen import SettingsScreen
from cudal1_tui.ui.widgets.banner import ErrorBanner
from cudal1_tui.ui.widgets.header import HeaderBar
from cudal1_tui.ui.widgets.output import ModelOutput
from cudal1_tui.ui.widgets.variants import VariantTable

WIDE = (200, 50)


def _app() -> CudaL1App:
    app = CudaL1App(Path("relu2.py"), Settings(), autostart=False)
    app.session.reference_source = recorded.REFERENCE
    return app


def _summary(ms: float, spread: float = 0.02) -> TimingSummary:
    samples = [ms * (1 - spread / 2), ms, ms * (1 + spread / 2)] * 10
    return TimingSummary(samples_ms=samples, median_ms=ms, p10_ms=samples[0],
                         p90_ms=samples[2], mean_ms=ms, spread=spread, n=len(samples))


def _timed(record: CandidateRecord, record_id: str, slot: int, ref: float, cand: float,
           speedup: float, flags: list[Flag] | None = None, **timing: float) -> CandidateRecord:
    """A verified record whose evaluator stored ``speedup`` for these medians."""
    times = {"reference": _summary(ref), "candidate": _summary(cand),
             **{k: _summary(v) for k, v in timing.items()}}
    result = Result(status="ok", correct=True, speedup=speedup, timing=times,
                    flags=flags or [], message=f"speedup {speedup:.3g}x (evaluator's words)")
    return replace(record, record_id=record_id, round=3, slot=slot, speedup=speedup,
                   result=result, reward=speedup - 1, decision="pending")


def _records() -> list[CandidateRecord]:
    base = recorded.records()
    return [
        *base,
        # the evaluator capped a slowed reference at the one timed alone +5 %
        _timed(base[0], "r3s0", 0, ref=12.5, cand=0.6, speedup=10.0 * 1.05 / 0.6,
               reference_pristine=10.0),
        # a stored 1.0007: shown as 1.00×, inside the noise
        _timed(base[0], "r3s1", 1, ref=16.25, cand=16.2386, speedup=1.0007,
               flags=[Flag("speedup_within_noise", "1x is within the timing noise", "info")]),
        # 1.30× but the samples are so noisy that it is inside the band
        replace(_timed(base[0], "r3s2", 2, ref=1.3, cand=1.0, speedup=1.3),
                result=Result(status="ok", correct=True, speedup=1.3, timing={
                    "reference": _summary(1.3, spread=1.5),
                    "candidate": _summary(1.0, spread=1.5)})),
    ]


async def _load(app: CudaL1App, records: list[CandidateRecord]) -> None:
    for event in [*recorded.opening_events(), *recorded.result_events()]:
        app.post_message(EngineEventPosted(event))
    app.post_message(RecordsLoaded(records))


def _select(app: CudaL1App, record_id: str) -> None:
    table = app.query_one(VariantTable)
    table.move_cursor(row=table.get_row_index(record_id))


async def test_the_header_names_whose_reference_it_shows() -> None:
    app = _app()
    async with app.run_test(size=WIDE) as pilot:
        header = app.query_one(HeaderBar)
        for event in recorded.opening_events():
            app.post_message(EngineEventPosted(event))
        await wait_until(pilot, lambda: "eager 500.0 µs" in header.render().plain, "the probe")
        assert "reference (probe estimate): eager 500.0 µs" in header.render().plain
        app.post_message(RecordsLoaded(_records()))
        table = app.query_one(VariantTable)
        await wait_until(pilot, lambda: table.row_count == 7, "rows")
        _select(app, "r3s0")
        # the reference r3s0's speedup divides by: 10 ms alone, +5 %
        await wait_until(pilot, lambda: "reference (row 3.0, alone +5 %): eager 10.50 ms"
                         in header.render().plain, "the selected row's reference")
        _select(app, "r1s1")
        await wait_until(pilot, lambda: "reference (row 1.1): eager 500.0 µs"
                         in header.render().plain, "another row's reference")
        _select(app, "r2s0")  # a compile error has no times: the newest timed row's shows
        await wait_until(pilot, lambda: "reference (row 3.2)" in header.render().plain,
                         "the newest timed row's reference")


async def test_a_rows_speedup_is_the_ratio_of_the_times_its_logs_print() -> None:
    app = _app()
    async with app.run_test(size=WIDE) as pilot:
        await _load(app, _records())
        table = app.query_one(VariantTable)
        await wait_until(pilot, lambda: table.row_count == 7, "rows")
        for record in _records():
            if record.status != "ok":
                continue
            _select(app, record.record_id)
            await pilot.pause()
            logs = plain(app.query_one("#logs-head", Static))
            found = re.search(r"reference ([\d.]+) (ms|µs)(?: \([^)]*\))? ÷ candidate "
                              r"([\d.]+) (ms|µs) = ([\d.]+)×", logs)
            assert found, logs
            scale = {"ms": 1.0, "µs": 1e-3}
            ref = float(found[1]) * scale[found[2]]
            cand = float(found[3]) * scale[found[4]]
            shown = f"{record.speedup:.2f}"
            assert f"{ref / cand:.2f}" == found[5] == shown, (logs, record.record_id)
            assert f"speedup {shown}×" in logs  # the row, the headline and the ratio agree
            cell = table.get_row(record.record_id)[table.column_keys.index("speedup")]
            assert str(cell) == f"{shown}×"
            assert "evaluator's words" not in logs  # its 3-digit rounding never competes


async def _accept_asks(app: CudaL1App, pilot: object, record_id: str) -> str:
    _select(app, record_id)
    await pilot.press("a")  # type: ignore[attr-defined]
    assert isinstance(app.screen, ConfirmScreen), record_id
    await pilot.pause()  # type: ignore[attr-defined]
    body = plain(app.screen.query_one("#confirm-body", Static))
    # the safe answer has the focus (the quit dialog is the same screen)
    assert app.focused is app.screen.query_one("#confirm-no", Button)
    await pilot.press("escape")  # type: ignore[attr-defined]
    return body


async def test_accepting_a_non_win_asks_with_the_reason() -> None:
    app = _app()
    async with app.run_test(size=WIDE) as pilot:
        await _load(app, _records())
        table = app.query_one(VariantTable)
        await wait_until(pilot, lambda: table.row_count == 7, "rows")
        assert "not faster than the reference (1.00×)" in await _accept_asks(app, pilot, "r3s1")
        assert "inside the timing noise" in await _accept_asks(app, pilot, "r3s2")
        cell = table.get_row("r3s1")[table.column_keys.index("speedup")]
        assert "green" not in str(cell.style)


async def test_table_layout_sort_arrow_source_and_range() -> None:
    app = _app()
    async with app.run_test(size=WIDE) as pilot:
        await _load(app, _records())
        table = app.query_one(VariantTable)
        await wait_until(pilot, lambda: table.row_count == 7, "rows")
        await pilot.pause()
        labels = {str(k.value): str(c.label) for k, c in table.columns.items()}
        assert labels["round"] == "rnd▲"
        await pilot.press("S")
        labels = {str(k.value): str(c.label) for k, c in table.columns.items()}
        assert labels["speedup"] == "speedup▼" and labels["round"] == "rnd"
        # at 200 columns the built-in's name is whole
        source = table.columns[next(k for k in table.columns if k.value == "source")]
        assert source.width >= len("⚙ inplace_ops")
        assert "⚙ inplace_ops" in str(table.get_row("r1s0")[table.column_keys.index("source")])
        # a range above 10× keeps its ×
        rng = str(table.get_row("r3s0")[table.column_keys.index("range")])
        assert rng.endswith("×") and len(rng) <= 11, rng


async def test_the_logs_tell_a_rejection_once() -> None:
    app = _app()
    async with app.run_test(size=WIDE) as pilot:
        await _load(app, _records())
        table = app.query_one(VariantTable)
        await wait_until(pilot, lambda: table.row_count == 7, "rows")
        app.post_message(RecordsLoaded(_records()))  # a second refresh logs nothing again
        await pilot.pause()
        text = "\n".join(app.session.log_history)
        assert text.count("the candidate wrote to its input tensor x") == 1, text


async def test_settings_offer_the_model_server() -> None:
    app = _app()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("s")
        assert isinstance(app.screen, SettingsScreen)
        field = app.screen.query_one("#set-base_url", Input)
        assert field.value == Settings().base_url


async def test_an_event_for_row_speedups_logs_the_rows_digits() -> None:
    app = _app()
    async with app.run_test(size=WIDE) as pilot:
        app.post_message(EngineEventPosted(ev.CandidateFinished(
            3, 1, "r3s1", "model", "ok", 1.0007, 0.0)))
        await pilot.pause()
        assert any(line.endswith("ok 1.00×") for line in app.session.log_history)


async def test_esc_on_a_slot_whose_reply_is_complete_stops_nothing() -> None:
    app = _app()
    async with app.run_test(size=WIDE) as pilot:
        for event in [*recorded.opening_events(), *recorded.streaming_events()]:
            app.post_message(EngineEventPosted(event))
        await pilot.pause()
        assert app.query_one(ModelOutput).live == (1, 1)
        before = app.session.header_info.status
        await pilot.press("escape")  # the engine no longer streams it: nothing is stopped
        await pilot.pause()
        notes = [n.message for n in app._notifications]
        assert any("has finished replying" in n for n in notes), notes
        assert "stopped" not in app.session.header_info.status
        assert app.session.header_info.status == before


async def test_built_in_only_says_plainly_that_nothing_is_left() -> None:
    app = _builtin_app()
    async with app.run_test(size=WIDE) as pilot:
        events = [*recorded.opening_events(), *recorded.result_events(),
                  ev.EngineError("nothing new to try: every built-in strategy for this problem "
                                 "has been evaluated in this session (inplace_ops), and no "
                                 "model is available", "start a model server", 3, True,
                                 severity="info")]
        for event in events:
            app.post_message(EngineEventPosted(event))
        await pilot.pause()
        banner = app.query_one(ErrorBanner)
        assert banner.display and banner.has_class("-info")  # no red error banner
        assert plain(banner.query_one("#banner-message", Static)).startswith("info")
        assert "nothing new to try" in app.session.header_info.status
        assert "finished" not in app.session.header_info.status
        assert sorted(app.session.best_by_round) == [1, 2]  # no bar for a round that never ran


def _builtin_app() -> CudaL1App:
    app = CudaL1App(Path("relu2.py"), Settings(use_builtin=True), autostart=False)
    app.session.reference_source = recorded.REFERENCE
    return app
