"""The Textual app: keys and actions on top of the session view.

Rebindable keys: each binding has an id (the action's name in ``settings.keys``),
and the settings' key table is applied as a Textual keymap.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from textual import work
from textual.app import App
from textual.binding import Binding, BindingType
from textual.command import Provider

from cudal1_tui.ui.actions import ACTIONS, key_label
from cudal1_tui.ui.palette import ActionsProvider
from cudal1_tui.ui.screens.confirm_screen import ConfirmScreen
from cudal1_tui.ui.screens.help_screen import HelpScreen
from cudal1_tui.ui.screens.rounds_screen import RoundsScreen
from cudal1_tui.ui.screens.settings_screen import FIELDS, SettingsScreen
from cudal1_tui.ui.view import DIFF_BASES, SessionView
from cudal1_tui.ui.widgets.detail import DetailPane
from cudal1_tui.ui.widgets.output import ModelOutput
from cudal1_tui.ui.widgets.variants import VariantTable, accept_doubts

if TYPE_CHECKING:  # the store's listing and export load gitpython: only when first used
    from cudal1_tui.store.listing import SessionSummary
    from cudal1_tui.ui.screens.export_screen import ExportRequest

class CudaL1App(SessionView):
    CSS_PATH = "styles/app.tcss"
    KEYMAP_IDS: ClassVar[frozenset[str]] = frozenset(a.binding_id for a in ACTIONS)
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(a.key, a.action, a.text, id=a.binding_id, show=a.footer)
        for a in ACTIONS if a.key
    ]
    COMMANDS: ClassVar[set[type[Provider] | Callable[[], type[Provider]]]] = {
        *App.COMMANDS, ActionsProvider}

    # ── rounds ──────────────────────────────────────────────────────────────
    def action_next_round(self) -> None:
        if self._engine_ready():
            self.start_rounds(1)

    def action_run_rounds(self) -> None:
        if not self._engine_ready():
            return

        def chosen(n: int | None) -> None:
            if n:
                self.start_rounds(n)

        self.push_screen(RoundsScreen(), chosen)

    def action_cancel(self) -> None:
        live = self.query_one(ModelOutput).live
        if live is not None and self.runner.cancel_slot(live[1]):
            self.set_status(f"stopped slot {live[0]}.{live[1]}; the round goes on "
                            "(X cancels the round)")
            return
        self.action_cancel_round()

    def action_cancel_round(self) -> None:
        if self.runner.cancel():
            self.set_status("cancelling the running stage…")
        else:
            self.notify("nothing is running")

    def _engine_ready(self) -> bool:
        if self.runner.engine is None:
            self.notify("the session is still opening", severity="warning")
            return False
        return True

    # ── decisions ───────────────────────────────────────────────────────────
    def action_accept(self) -> None:
        record = self.selected_record()
        if record is None:
            self.notify("select a variant first", severity="warning")
            return
        if record.status != "ok":
            self.notify(f"only verified variants can be accepted ({record.status})",
                        severity="warning")
            return
        reasons = accept_doubts(record)
        if not reasons:
            self.decide("accept", record.record_id)
            return

        def confirmed(yes: bool | None) -> None:
            if yes:
                self.decide("accept", record.record_id)

        body = (f"Variant {record.round}.{record.slot}: " + "; ".join(reasons)
                + ".\nAccept it anyway?")
        self.push_screen(ConfirmScreen("Accept this variant?", body), confirmed)

    def action_reject(self) -> None:
        record = self.selected_record()
        if record is None:
            self.notify("select a variant first", severity="warning")
            return
        self.decide("reject", record.record_id)

    def action_undo(self) -> None:
        if self._engine_ready():
            self.decide("undo", "")

    @work(thread=True, group="engine", exit_on_error=False)
    def decide(self, what: str, record_id: str) -> None:
        if self.runner.busy:  # the engine takes one call at a time
            self.call_from_thread(self.notify, f"{what}: applied when the running round ends")
        try:
            if what == "accept":
                self.runner.call(lambda e: e.accept(record_id))
            elif what == "reject":
                self.runner.call(lambda e: e.reject(record_id))
            elif self.runner.call(lambda e: e.undo()) is None:
                self.call_from_thread(self.notify, "nothing to undo")
        except Exception as exc:
            self.call_from_thread(self.report_error, exc, None)
        self.refresh_records()

    # ── the diff ────────────────────────────────────────────────────────────
    def action_diff_base(self) -> None:
        index = DIFF_BASES.index(self.diff_base)
        self.diff_base = DIFF_BASES[(index + 1) % len(DIFF_BASES)]
        self.render_diff()
        self.notify(f"diff against {self.diff_base}", timeout=2)

    def action_diff_layout(self) -> None:
        self.diff_layout = "split" if self.diff_layout == "unified" else "unified"
        self.render_diff()

    # ── modals ──────────────────────────────────────────────────────────────
    def action_help(self) -> None:
        rows = [(key_label(self.key_of(a.binding_id)), a.text) for a in ACTIONS]
        rows.append(("^p", "command palette: every action by name"))
        self.push_screen(HelpScreen(rows))

    def key_of(self, binding_id: str) -> str:
        default = next(a.key for a in ACTIONS if a.binding_id == binding_id)
        return self.settings.keys.get(binding_id, default)

    def action_next_tab(self) -> None:
        self.query_one(DetailPane).cycle_tab(1)

    def action_previous_tab(self) -> None:
        self.query_one(DetailPane).cycle_tab(-1)

    def action_sort(self, column: str) -> None:
        self.query_one(VariantTable).sort_by(column)

    def action_select_best(self) -> None:
        if not self.query_one(VariantTable).select_best():
            self.notify("no verified variant yet")

    def action_settings(self) -> None:
        current: dict[str, Any] = {f.name: getattr(self.settings, f.name) for f in FIELDS}

        def saved(changes: dict[str, Any] | None) -> None:
            if changes:
                self.apply_settings(changes)

        self.push_screen(SettingsScreen(current, self.config_path), saved)

    @work(thread=True, group="engine", exit_on_error=False)
    def apply_settings(self, changes: dict[str, Any]) -> None:
        try:
            self.runner.call(lambda e: e.update_settings(**changes))
        except Exception as exc:
            self.call_from_thread(self.report_error, exc, None)
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
                self.call_from_thread(self.report_error, exc, None)
                where = "this session only (the config file could not be written)"
        self.call_from_thread(self.log_line, f"settings: {summary}; {where}")
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
                                      self.header_info.problem), chosen)

    @work(thread=True, group="export", exit_on_error=False)
    def export(self, request: ExportRequest) -> None:
        engine = self.runner.engine
        if engine is None or engine.session_path is None:
            return
        from cudal1_tui.ui import exporting

        try:
            written = exporting.export_session(Path(engine.session_path), request)
        except Exception as exc:
            self.call_from_thread(self.report_error, exc, lambda: self.export(request))
            return
        self.call_from_thread(self.log_line, f"exported {request.format} to {written}")
        self.call_from_thread(self.notify, str(written), title=f"exported {request.format}")

    def action_open_session(self) -> None:
        self.load_sessions()

    @work(thread=True, group="sessions", exit_on_error=False)
    def load_sessions(self) -> None:
        from cudal1_tui.config import sessions_dir
        from cudal1_tui.store.listing import list_sessions

        try:
            sessions = list_sessions(sessions_dir(self.settings))
        except Exception as exc:
            self.call_from_thread(self.report_error, exc, None)
            return
        self.call_from_thread(self._choose_session, sessions)

    def _choose_session(self, sessions: list[SessionSummary]) -> None:
        if self.round_running:
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
        self.best_by_round.clear()
        self.query_one(VariantTable).show_records([])
        self.set_status(f"opening {summary.session_id}…", session_id=summary.session_id,
                        problem=summary.problem, best_speedup=None)
        self.open_session(self.problem_path, self._resume)

    # ── quitting ────────────────────────────────────────────────────────────
    async def action_quit(self) -> None:
        if self.quitting or self.runner.engine is None:
            self.exit(0)
            return
        if self.round_running:
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
        if engine is not None and engine.session_path and self.query_one(VariantTable).records:
            self.closed_session = (engine.session_id, str(engine.session_path))

    def _close(self) -> None:
        self._remember_session()
        self.quitting = True
        self.set_status("saving and closing… (q again to leave at once)")
        self.close_and_exit()

    @work(thread=True, group="close", exit_on_error=False)
    def close_and_exit(self) -> None:
        try:
            self.runner.close()
        except Exception as exc:
            self.call_from_thread(self.report_error, exc, None)
            return
        self.call_from_thread(self.exit, 0)
