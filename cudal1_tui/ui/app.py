"""The Textual app: startup, the global keys, the screen stack and the engine's lifecycle.

What a session shows and does lives in ``screens/session_screen.py``. Rebindable keys: each
binding has an id (the action's name in ``settings.keys``), and the settings' key table is
applied as the app's one Textual keymap, to the app's bindings and the screens' alike.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from textual import on, work
from textual.app import App
from textual.binding import Binding, BindingType
from textual.command import Provider
from textual.screen import Screen

from cudal1_tui.config import DEFAULT_KEYS, Settings
from cudal1_tui.config.saving import Scalar
from cudal1_tui.engine.events import EngineEvent
from cudal1_tui.errors import Cudal1Error
from cudal1_tui.ui.actions import ACTIONS, key_label
from cudal1_tui.ui.display import DisplayOptions
from cudal1_tui.ui.engine_port import EngineFactory, Sizes, real_engine_factory
from cudal1_tui.ui.messages import EngineEventPosted, RecordsLoaded
from cudal1_tui.ui.palette import ActionsProvider
from cudal1_tui.ui.runner import EngineRunner
from cudal1_tui.ui.screens.confirm_screen import ConfirmScreen
from cudal1_tui.ui.screens.help_screen import HelpScreen
from cudal1_tui.ui.screens.session_screen import SessionScreen
from cudal1_tui.ui.screens.settings_screen import SettingsScreen

if TYPE_CHECKING:  # the store's listing and export load gitpython: only when first used
    from cudal1_tui.store.listing import SessionSummary
    from cudal1_tui.ui.screens.export_screen import ExportRequest


class CudaL1App(App[int]):
    TITLE = "cudal1-tui"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(a.key, a.action, a.text, id=a.binding_id, show=a.footer)
        for a in ACTIONS if a.scope == "app"
    ]
    COMMANDS: ClassVar[set[type[Provider] | Callable[[], type[Provider]]]] = {
        *App.COMMANDS, ActionsProvider}

    def __init__(
        self,
        problem_path: Path,
        settings: Settings,
        *,
        resume: str | Path | None = None,
        sizes: Sizes = "auto",
        engine_factory: EngineFactory | None = None,
        measure_startup: bool = False,
        autostart: bool = True,
        display_options: DisplayOptions | None = None,
        config_path: Path | None = None,
    ) -> None:
        super().__init__()
        self._started = time.perf_counter()
        self.problem_path = problem_path
        self.settings = settings
        self.config_path = config_path  # where settings changed in the app are saved; None: not
        self._resume = resume
        self.runner = EngineRunner(
            engine_factory or real_engine_factory(settings, sizes), self._emit
        )
        self.first_frame_ms: float | None = None
        self.first_frame_at: float | None = None  # wall clock, for the startup benchmark
        self._measure_startup = measure_startup
        self._autostart = autostart
        # the "masked measurements" mode lives here: see ui/display.py
        self.display_options = display_options or DisplayOptions()
        self.session = SessionScreen(self.runner, settings, self.display_options,
                                     problem_path.stem, self.reopen_session)
        self.quitting = False
        self.closed_session: tuple[str, str] | None = None  # (id, path) for the exit line
        self.open_error: Cudal1Error | None = None  # why the session did not open (exit 1)
        self.set_keymap(dict(settings.keys))  # checked at load: known ids, no clashes

    def get_default_screen(self) -> Screen[Any]:
        # Textual loads a screen's own CSS_PATH when it is pushed or built from MODES, not for
        # the default screen: load it here, as push_screen would
        self._load_screen_css(self.session)
        return self.session

    def on_mount(self) -> None:
        self.call_after_refresh(self._first_frame)

    def _first_frame(self) -> None:
        self.first_frame_ms = (time.perf_counter() - self._started) * 1000
        self.first_frame_at = time.time()
        if self._measure_startup:
            self.exit(0)
        elif self._autostart:
            self.open_session(self.problem_path, self._resume)

    # ── the engine ──────────────────────────────────────────────────────────
    def _emit(self, event: EngineEvent) -> None:
        """Called by the engine on its worker thread: hand over to the UI thread."""
        self.post_message(EngineEventPosted(event))

    # The app may handle a message before its default screen is composed: until then the
    # session screen gets it on its own queue, which it works through once composed.
    @on(EngineEventPosted)
    def _on_engine_event(self, message: EngineEventPosted) -> None:
        if self.session.is_mounted:
            self.session.show_event(message)
        else:
            self.session.post_message(EngineEventPosted(message.event))

    @on(RecordsLoaded)
    def _on_records(self, message: RecordsLoaded) -> None:
        if self.session.is_mounted:
            self.session.show_records(message)
        else:
            self.session.post_message(RecordsLoaded(message.records))

    def reopen_session(self) -> None:
        self.open_session(self.problem_path, self._resume)

    @work(thread=True, group="engine", exit_on_error=False)
    def open_session(self, problem_path: Path, resume: str | Path | None) -> None:
        try:
            engine = self.runner.open(problem_path, resume)
        except Exception as exc:
            retry = lambda: self.open_session(problem_path, resume)  # noqa: E731
            self.open_error = exc if isinstance(exc, Cudal1Error) else Cudal1Error(str(exc))
            self.call_from_thread(self.session.report_error, exc, retry)
            self.call_from_thread(self.session.open_failed)
            return
        self.open_error = None
        self.call_from_thread(self.session.session_opened, engine.problem_source,
                              engine.session_id)
        self.session.refresh_records()

    # ── global actions ──────────────────────────────────────────────────────
    def action_help(self) -> None:
        rows = [(key_label(self.key_of(a.binding_id)), a.text) for a in ACTIONS]
        rows.append(("^p", "command palette: every action by name"))
        self.push_screen(HelpScreen(rows))

    def key_of(self, binding_id: str) -> str:
        return self.settings.keys.get(binding_id, DEFAULT_KEYS[binding_id])

    def action_settings(self) -> None:
        def saved(changes: dict[str, Scalar] | None) -> None:
            if changes:
                self.apply_settings(changes)

        self.push_screen(SettingsScreen(self.settings, self.config_path), saved)

    @work(thread=True, group="engine", exit_on_error=False)
    def apply_settings(self, changes: dict[str, Scalar]) -> None:
        try:
            self.runner.call(lambda e: e.update_settings(**changes))
        except Exception as exc:
            self.call_from_thread(self.session.report_error, exc, None)
            return
        for name, value in changes.items():
            setattr(self.settings, name, value)
        summary = ", ".join(f"{k}={v}" for k, v in changes.items())
        where = "this session only (no config file)"
        if self.config_path is not None:
            from cudal1_tui.config.saving import save_settings

            try:
                where = f"saved to {save_settings(self.config_path, changes)}"
            except Exception as exc:
                self.call_from_thread(self.session.report_error, exc, None)
                where = "this session only (the config file could not be written)"
        self.call_from_thread(self.session.log_line, f"settings: {summary}; {where}")
        self.call_from_thread(self.notify, f"{summary}\n{where}", title="settings applied")

    def action_export(self) -> None:
        engine = self.runner.engine
        if engine is None:
            self.notify("no session to export yet", severity="warning")
            return

        from cudal1_tui.ui.screens.export_screen import ExportScreen

        def chosen(request: ExportRequest | None) -> None:
            if request is not None:
                self.export(request)

        self.push_screen(ExportScreen(self.display_options.session(engine.session_id),
                                      self.session.header_info.problem), chosen)

    @work(thread=True, group="export", exit_on_error=False)
    def export(self, request: ExportRequest) -> None:
        engine = self.runner.engine
        if engine is None or engine.session_path is None:
            return
        from cudal1_tui.ui import exporting

        try:
            written, rows = exporting.export_session(Path(engine.session_path), request)
        except Exception as exc:
            self.call_from_thread(self.session.report_error, exc, lambda: self.export(request))
            return
        if rows == 0:  # no success notice for an empty file: there is no file
            why = exporting.nothing_exported(request)
            self.call_from_thread(self.session.log_line, why)
            self.call_from_thread(self.notify, why, severity="warning", title="nothing exported")
            return
        noun = "row" if rows == 1 else "rows"
        self.call_from_thread(self.session.log_line,
                              f"exported {rows} {noun} ({request.format}) to {written}")
        self.call_from_thread(self.notify, f"{rows} {noun} to {written}",
                              title=f"exported {request.format}")

    def action_open_session(self) -> None:
        self.load_sessions()

    @work(thread=True, group="sessions", exit_on_error=False)
    def load_sessions(self) -> None:
        from cudal1_tui.config import sessions_dir
        from cudal1_tui.store.listing import list_sessions

        try:
            sessions = list_sessions(sessions_dir(self.settings))
        except Exception as exc:
            self.call_from_thread(self.session.report_error, exc, None)
            return
        self.call_from_thread(self._choose_session, sessions)

    def _choose_session(self, sessions: list[SessionSummary]) -> None:
        if self.session.round_running:
            self.notify("cancel the running round first (escape)", severity="warning")
            return
        from cudal1_tui.ui.screens.sessions_screen import SessionsScreen

        current = self.runner.engine.session_id if self.runner.engine else ""

        def chosen(summary: SessionSummary | None) -> None:
            if summary is not None and summary.session_id != current:
                self.switch_session(summary)

        self.push_screen(SessionsScreen(sessions, current), chosen)

    def switch_session(self, summary: SessionSummary) -> None:
        from cudal1_tui.ui import exporting

        self.problem_path = exporting.problem_path_of(Path(summary.folder), self.problem_path)
        self._resume = summary.folder
        self.session.clear_records()
        self.session.set_status(f"opening {summary.session_id}…", session_id=summary.session_id,
                                problem=summary.problem, best_speedup=None)
        self.open_session(self.problem_path, self._resume)

    # ── quitting ────────────────────────────────────────────────────────────
    async def action_quit(self) -> None:
        if self.quitting or self.runner.engine is None:
            self.exit(1 if self.open_error is not None else 0)
            return
        if self.session.round_running:
            def confirmed(yes: bool | None) -> None:
                if yes:
                    self._close()

            body = ("A round is running. Quitting cancels it; candidates already evaluated "
                    "are saved in the session.\nQuit now?")
            self.push_screen(ConfirmScreen("Quit while a round runs?", body, yes="Quit"),
                             confirmed)
            return
        self._close()

    def _remember_session(self) -> None:
        """What the exit line names: a session that holds at least one candidate."""
        engine = self.runner.engine
        if engine is not None and engine.session_path and self.session.has_records():
            self.closed_session = (engine.session_id, str(engine.session_path))

    def _close(self) -> None:
        self._remember_session()
        self.quitting = True
        self.session.set_status("saving and closing… (q again to leave at once)")
        self.close_and_exit()

    @work(thread=True, group="close", exit_on_error=False)
    def close_and_exit(self) -> None:
        try:
            self.runner.close()
        except Exception as exc:
            self.call_from_thread(self.session.report_error, exc, None)
            return
        self.call_from_thread(self.exit, 0)
