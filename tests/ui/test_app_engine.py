"""Pilot tests driven by the real engine: CPU evaluation, the local replay model server."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import ui_problems as problems
from textual.widgets import Button, Checkbox, Input, Log, RadioButton, Static, TextArea
from ui_helpers import SIZE, engine_settings, plain, wait_until

from cudal1_evaluator.schema import Result
from cudal1_tui.cli.commands.open_cmd import exit_line
from cudal1_tui.config import Settings
from cudal1_tui.records import CandidateRecord
from cudal1_tui.replay import ReplayConfig, ReplayServer, Reply
from cudal1_tui.store.session import Session
from cudal1_tui.ui.app import CudaL1App
from cudal1_tui.ui.screens.confirm_screen import ConfirmScreen
from cudal1_tui.ui.screens.export_screen import ExportScreen
from cudal1_tui.ui.screens.rounds_screen import RoundsScreen
from cudal1_tui.ui.screens.sessions_screen import SessionsScreen
from cudal1_tui.ui.screens.settings_screen import SettingsScreen
from cudal1_tui.ui.widgets.banner import ErrorBanner
from cudal1_tui.ui.widgets.detail import DetailPane
from cudal1_tui.ui.widgets.output import ModelOutput
from cudal1_tui.ui.widgets.variants import VariantTable


def _ready(app: CudaL1App) -> bool:
    return app.runner.engine is not None and app.session.header_info.status.startswith("ready")


def _decision(app: CudaL1App) -> str:
    record = app.session.selected_record()
    return record.decision if record else ""


def _trace(session_dir: Path) -> list[dict[str, object]]:
    lines = (session_dir / "trace.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


async def test_round_accept_undo_reject_and_quit_saves(problem_file: Path,
                                                       settings: Settings) -> None:
    app = CudaL1App(problem_file, settings)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: _ready(app), "the session to open")
        info = app.session.header_info
        assert info.device.startswith("cpu") and info.reference_ms
        await pilot.press("n")
        await wait_until(pilot, lambda: app.query_one(VariantTable).row_count == 1
                         and not app.session.round_running, "a result row")
        record = app.session.selected_record()
        assert record is not None and record.status == "ok", record
        assert app.query_one("#code-python", TextArea).text == record.code
        assert "ModelNew" in plain(app.query_one("#diff-body", Static))
        assert any("clamp_min" in line for line in app.query_one("#content", Log).lines)

        await pilot.press("a")
        if record.speedup is None or record.speedup <= 1.0:  # a CPU timing may say so
            assert isinstance(app.screen, ConfirmScreen)
        if isinstance(app.screen, ConfirmScreen):  # also for a warning (a busy CPU's timing)
            await pilot.press("y")
        await wait_until(pilot, lambda: _decision(app) == "accepted", "the accept")
        engine = app.runner.engine
        assert engine is not None
        session_dir = Path(engine.session_path)
        await pilot.press("u")
        await wait_until(pilot, lambda: _decision(app) != "accepted", "the undo")
        await pilot.press("r")
        await wait_until(pilot, lambda: _decision(app) == "rejected", "the reject")
        await pilot.press("q")
        await wait_until(pilot, lambda: app.return_code is not None, "the app to quit")
    assert app.runner.engine is None  # closed on quit
    assert app.closed_session == (session_dir.name, str(session_dir))  # for the exit line
    rows = _trace(session_dir)
    decisions = [r["decision"] for r in rows if r.get("kind") == "decision"]
    assert decisions == ["accepted", "undone", "rejected"]
    assert [r["status"] for r in rows if r.get("kind") == "candidate"] == ["ok"]
    assert not (session_dir / "session.lock").exists() or Session.open(session_dir)


async def test_settings_and_export_reach_the_engine_and_the_store(
    problem_file: Path, settings: Settings, tmp_path: Path
) -> None:
    config = tmp_path / "config" / "config.toml"
    config.parent.mkdir()
    config.write_text("# mine\ntemperature = 0.7\n\n[keys]\nhelp = \"question_mark\"\n")
    app = CudaL1App(problem_file, settings, config_path=config)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: _ready(app), "the session to open")
        await pilot.press("s")
        assert isinstance(app.screen, SettingsScreen)
        assert f"saved to {config}" in plain(app.screen.query_one("#settings-where", Static))
        app.screen.query_one("#set-temperature", Input).value = "9"
        await pilot.click("#settings-save")
        assert "out of range" in plain(app.screen.query_one("#settings-error", Static))
        await pilot.pause(0.3)  # a button ignores clicks during its press animation
        app.screen.query_one("#set-temperature", Input).value = "0.25"
        app.screen.query_one("#set-candidates_per_round", Input).value = "3"
        await pilot.click("#settings-save")
        engine = app.runner.engine
        assert engine is not None
        await wait_until(pilot, lambda: engine.settings.temperature == 0.25,
                         "the engine's settings")
        assert engine.settings.candidates_per_round == 3
        # the change persists: the config file says so, its comment and table kept
        from cudal1_tui.config import load_settings

        await wait_until(pilot, lambda: "0.25" in config.read_text(), "the config file")
        saved = load_settings(env={}, config_path=config).settings
        assert (saved.temperature, saved.candidates_per_round) == (0.25, 3)
        assert config.read_text().startswith("# mine\n")

        app.runner.call(lambda e: e.update_settings(candidates_per_round=1))
        await pilot.press("n")
        await wait_until(pilot, lambda: app.query_one(VariantTable).row_count >= 1
                         and not app.session.round_running, "a candidate to export")
        destination = tmp_path / "out" / "trace-export.jsonl"
        # nothing accepted and "accepted candidates only" ticked: no file, and it says so
        await _export(app, pilot, destination, accepted_only=True)
        await wait_until(pilot, lambda: any("nothing exported" in n.message
                                            for n in app._notifications), "the notice")
        assert not any(n.title.startswith("exported") for n in app._notifications)
        assert not destination.exists()
        await _export(app, pilot, destination, accepted_only=False)
        await wait_until(pilot, destination.is_file, "the export file")
        assert destination.stat().st_size > 0
        assert not app.query_one(ErrorBanner).display


async def _export(app: CudaL1App, pilot: object, destination: Path, *,
                  accepted_only: bool) -> None:
    await pilot.press("e")  # type: ignore[attr-defined]
    assert isinstance(app.screen, ExportScreen)
    jsonl = next(b for b in app.screen.query(RadioButton) if b.name == "jsonl")
    await pilot.click(jsonl)  # type: ignore[attr-defined]
    app.screen.query_one("#export-accepted", Checkbox).value = accepted_only
    app.screen.query_one("#export-dest", Input).value = str(destination)
    await pilot.click("#export-go")  # type: ignore[attr-defined]
    await wait_until(pilot, lambda: not isinstance(app.screen, ExportScreen),  # type: ignore[arg-type]
                     "the dialog to close")


async def test_esc_stops_one_slot_and_keeps_its_reply_then_x_cancels_the_rounds(
        problem_file: Path, tmp_path: Path) -> None:
    slow = ReplayConfig(replies=(Reply(problems.REPLY, problems.REASONING),), chunk_chars=8,
                        latency_s=0.05)
    with ReplayServer(slow) as server:
        app = CudaL1App(problem_file, engine_settings(tmp_path, server.base_url))
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: _ready(app), "the session to open")
            await pilot.press("N")
            assert isinstance(app.screen, RoundsScreen)
            app.screen.query_one(Input).value = "5"
            await pilot.press("enter")
            content = app.query_one("#content", Log)
            await wait_until(pilot, lambda: content.line_count > 0, "the model's reply to stream")
            assert "generating" in plain(app.query_one("#stage", Static))
            await pilot.press("escape")  # this slot only: its partial reply is recorded
            table = app.query_one(VariantTable)
            await wait_until(pilot, lambda: table.row_count == 1, "the stopped slot's record")
            stopped = next(iter(table.records.values()))
            assert stopped.parse_error.startswith("cancelled by the user")
            assert stopped.raw_response and stopped.round == 1
            # the reasoning streamed before the stop is kept too, and the row says cancelled
            assert stopped.reasoning and problems.REASONING.startswith(stopped.reasoning)
            status = table.get_row(stopped.record_id)[table.column_keys.index("status")]
            assert str(status) == "cancelled"
            assert app.session.round_running  # the next rounds go on
            await wait_until(pilot, lambda: app.query_one(ModelOutput).live is not None
                             and app.query_one(ModelOutput).live[0] == 2, "round 2 to stream")
            await pilot.press("q")  # work is running: quitting asks first
            assert isinstance(app.screen, ConfirmScreen)
            await pilot.press("escape")
            assert not app.quitting and app.session.round_running
            await pilot.press("X")
            await wait_until(pilot, lambda: not app.session.round_running, "the cancel", timeout=60)
            assert table.row_count == 1
            assert "cancel" in app.session.header_info.status


async def test_server_down_shows_banner_then_retry_uses_the_server_once_up(
    problem_file: Path, tmp_path: Path
) -> None:
    with socket.socket() as probe:  # a free port, where nothing listens yet
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings = engine_settings(tmp_path, f"http://127.0.0.1:{port}/v1")
    app = CudaL1App(problem_file, settings)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: _ready(app), "the session to open")
        await pilot.press("n")
        banner = app.query_one(ErrorBanner)
        await wait_until(pilot, lambda: banner.display, "the error banner")
        text = plain(banner.query_one("#banner-message", Static)) + plain(
            banner.query_one("#banner-fix", Static))
        assert "model server" in text and "OPENAI_BASE_URL" in text
        assert banner.query_one("#banner-retry", Button).display
        await wait_until(pilot, lambda: not app.session.round_running, "the round to end")
        assert "Traceback" not in "\n".join(app.session.log_history)
        config = ReplayConfig(replies=(Reply(problems.REPLY, problems.REASONING),), port=port)
        with ReplayServer(config):
            await pilot.pause(0.3)  # let the banner's layout settle before clicking it
            await pilot.click("#banner-retry")
            await wait_until(pilot, lambda: app.query_one(VariantTable).row_count == 1
                             and not app.session.round_running, "the model's candidate")
        assert not banner.display
        record = app.session.selected_record()
        assert record is not None and record.source == "model"


async def test_open_a_past_session(problem_file: Path, settings: Settings,
                                   tmp_path: Path) -> None:
    other = tmp_path / "other_problem.py"  # another problem's session (issue 23)
    other.write_text(problems.PROBLEM, encoding="utf-8")
    old = Session.create(other, problems.PROBLEM, settings)
    old.append_candidate(CandidateRecord(
        record_id="old-1", session_id=old.id, round=1, slot=0, source="model",
        problem_name="relu_scale", code=problems.CANDIDATE, result=Result(status="ok"),
        reward=0.5, reward_formula="clipped_speedup", status="ok", speedup=1.5))
    old.close()
    app = CudaL1App(problem_file, settings)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: _ready(app), "the session to open")
        first = app.session.header_info.session_id
        await pilot.press("o")
        await wait_until(pilot, lambda: isinstance(app.screen, SessionsScreen), "the list")
        table = app.screen.query_one("#sessions-table")
        assert table.row_count == 2
        keys = [str(k.value) for k in table.rows]
        # under load the modal may not be laid out yet when it becomes the screen
        await wait_until(pilot, lambda: table.region.height > 2, "the list laid out")
        await pilot.click("#sessions-table", offset=(2, 1 + keys.index(old.id)))
        await wait_until(pilot, lambda: table.cursor_row == keys.index(old.id), "the row")
        await pilot.click("#sessions-open")
        await wait_until(pilot, lambda: app.session.header_info.session_id == old.id
                         and _ready(app), "the old session to open")
        await wait_until(pilot, lambda: app.query_one(VariantTable).row_count == 1, "its rows")
        chosen = app.session.selected_record()
        assert chosen is not None and chosen.record_id == "old-1"
        assert first != old.id
        # the session this launch made never got a candidate: it is not left behind
        assert not (Path(settings.sessions_dir) / first).exists()
        assert old.path.is_dir()
        app.query_one(DetailPane).active = "tab-code"
        await pilot.press("q")
        await wait_until(pilot, lambda: app.return_code is not None, "the app to quit")
    # the exit line resumes the session that was open, with its own problem file
    assert app.closed_session == (old.id, str(old.path))
    assert app.problem_path.resolve() == other.resolve()
    line = exit_line(*app.closed_session, app.problem_path)
    assert f"--resume {old.id}" in line and "other_problem.py" in line


async def test_broken_problem_shows_the_inspection_then_retry_opens(
    problem_file: Path, settings: Settings
) -> None:
    good = problem_file.read_text(encoding="utf-8")
    problem_file.write_text(good.replace("def get_inputs", "def get_inputz"), encoding="utf-8")
    app = CudaL1App(problem_file, settings)
    async with app.run_test(size=SIZE) as pilot:
        banner = app.query_one(ErrorBanner)
        await wait_until(pilot, lambda: banner.display, "the error banner")
        assert "get_inputs" in plain(banner.query_one("#banner-message", Static))
        assert app.runner.engine is None  # no half-open engine (issue 23)
        await pilot.press("n")  # says what to do, never the engine's "call open() first"
        notes = [n.message for n in app._notifications]
        assert any("the session did not open" in n for n in notes), notes
        assert app.open_error is not None and "could not open" in app.session.header_info.status
        problem_file.write_text(good, encoding="utf-8")
        await pilot.pause(0.3)  # let the banner's layout settle before clicking it
        await pilot.click("#banner-retry")
        await wait_until(pilot, lambda: _ready(app), "the session to open after the fix")
        assert not banner.display
