"""The session screen: the variants, their detail tabs, the rounds and the decisions.

Every blocking engine call runs in a thread worker through the app's ``EngineRunner``;
engine events are rendered by ``ui/event_rendering.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, ClassVar, Literal, TypeVar, cast

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import Footer, RichLog

from cudal1_tui.config import Settings
from cudal1_tui.errors import Cudal1Error
from cudal1_tui.records import CandidateRecord
from cudal1_tui.ui.actions import ACTIONS
from cudal1_tui.ui.baseline import PROBE_LABEL, header_reference
from cudal1_tui.ui.diffing import Layout
from cudal1_tui.ui.display import DisplayOptions
from cudal1_tui.ui.event_rendering import render_event
from cudal1_tui.ui.format import failure_lines
from cudal1_tui.ui.messages import EngineEventPosted, RecordsLoaded, RetryRequested, VariantChosen
from cudal1_tui.ui.runner import EngineRunner
from cudal1_tui.ui.screens.confirm_screen import ConfirmScreen
from cudal1_tui.ui.screens.rounds_screen import RoundsScreen
from cudal1_tui.ui.widgets.banner import ErrorBanner
from cudal1_tui.ui.widgets.chart import SpeedupChart
from cudal1_tui.ui.widgets.detail import DetailPane
from cudal1_tui.ui.widgets.header import HeaderBar, HeaderInfo
from cudal1_tui.ui.widgets.output import ModelOutput
from cudal1_tui.ui.widgets.stage_progress import ProgressStrip
from cudal1_tui.ui.widgets.variants import VariantTable, accept_doubts

F = TypeVar("F", bound=Callable[..., None])
Decision = Literal["accept", "reject", "undo"]

DIFF_BASES = ("reference", "best", "accepted")
LOG_KEEP = 5000


def guarded(handler: F) -> F:
    """Render failures on the UI thread go to the banner and Logs, never a traceback."""

    @wraps(handler)
    def safe(self: SessionScreen, *args: Any) -> None:
        try:
            handler(self, *args)
        except NoMatches:
            pass  # a late message while the app shuts down: its widgets are gone
        except Exception as exc:
            self.report_error(exc, None)

    return cast(F, safe)


class SessionScreen(Screen[None]):
    CSS_PATH = "../styles/session.tcss"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]  # noqa: RUF012 (Textual's)
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(a.key, a.action, a.text, id=a.binding_id, show=a.footer)
        for a in ACTIONS if a.scope == "session"
    ]

    def __init__(self, runner: EngineRunner, settings: Settings, display_options: DisplayOptions,
                 problem_name: str, reopen: Callable[[], None]) -> None:
        super().__init__()
        self.runner = runner
        self.settings = settings
        self.display_options = display_options
        self.reopen = reopen  # open the session again (the banner's retry after a failed probe)
        self.header_info = HeaderInfo(problem=problem_name, status="opening the session…")
        self.reference_source = ""
        self.best_by_round: dict[int, float] = {}
        self.diff_base = DIFF_BASES[0]
        self.diff_layout: Layout = "unified"
        self.retry: Callable[[], object] | None = None
        self._logged: set[str] = set()
        self.round_running = False
        self.select_best_next = False  # a round just finished: move to its fastest row
        self.log_history: list[str] = []  # what the Logs tab shows, as plain text

    # ── layout ──────────────────────────────────────────────────────────────
    def compose(self) -> ComposeResult:
        yield HeaderBar(id="header")
        yield ErrorBanner(id="banner")
        with Horizontal(id="main"):
            with Vertical(id="left"):
                yield VariantTable(id="variants")
                yield SpeedupChart(id="chart")
            yield DetailPane(id="detail")
        yield ProgressStrip(id="progress")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(ErrorBanner).hide()
        self.query_one(HeaderBar).info = self.header_info
        self.query_one(ProgressStrip).set_idle("waiting for the session")
        self.query_one(VariantTable).focus()

    # ── status, logs, errors ────────────────────────────────────────────────
    def set_status(self, status: str, **changes: Any) -> None:
        info = self.header_info
        self.header_info = HeaderInfo(**{**info.__dict__, "status": status, **changes})
        self.query_one(HeaderBar).info = self.header_info

    def log_line(self, text: str) -> None:
        self.log_history.append(text)
        del self.log_history[:-LOG_KEEP]
        self.query_one("#logs", RichLog).write(text)

    def report_error(self, exc: BaseException, retry: Callable[[], object] | None) -> None:
        """Show a failure in the banner and Logs: message and fix, never a traceback."""
        if isinstance(exc, Cudal1Error):
            message, fix = exc.message, exc.fix
        else:
            message, fix = f"{type(exc).__name__}: {exc}", "see Logs; retry, or restart the app"
        self.retry = retry
        try:
            self.query_one(ErrorBanner).show(message, fix, retry=retry is not None)
            self.log_line(f"error: {message}" + (f" (fix: {fix})" if fix else ""))
        except NoMatches:
            pass  # the app is shutting down

    @on(RetryRequested)
    def _on_retry(self) -> None:
        retry, self.retry = self.retry, None
        if retry is not None:
            retry()

    @on(EngineEventPosted)
    @guarded
    def show_event(self, message: EngineEventPosted) -> None:
        message.stop()  # handled here: it must not bubble back to the app, which forwards it
        render_event(self, message.event)

    def session_opened(self, problem_source: str, session_id: str) -> None:
        self.reference_source = problem_source
        engine = self.runner.engine
        self.set_status(
            "ready · n: next round, ?: help",
            session_id=session_id,
            device=self.header_info.device or (engine.device if engine else ""),
        )
        if self.header_info.reference_label == PROBE_LABEL:  # no row timed yet
            self.set_status(self.header_info.status,
                            reference_ms=engine.reference_ms if engine else None)
        self.query_one(ProgressStrip).set_idle()

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

        self.app.push_screen(RoundsScreen(), chosen)

    def action_cancel(self) -> None:
        live = self.query_one(ModelOutput).live
        if live is None:
            self.action_cancel_round()
        elif self.runner.cancel_slot(live[1]):
            self.set_status(f"stopped slot {live[0]}.{live[1]}; the round goes on "
                            "(X cancels the round)")
        else:  # its reply is complete: it is being evaluated, and nothing was stopped
            self.notify(f"slot {live[0]}.{live[1]} has finished replying and is being "
                        "evaluated: nothing to stop (X cancels the round)")

    def action_cancel_round(self) -> None:
        if self.runner.cancel():
            self.set_status("cancelling the running stage…")
        else:
            self.notify("nothing is running")

    def _engine_ready(self) -> bool:
        if self.runner.engine is None:
            failed = getattr(self.app, "open_error", None)
            self.notify("the session did not open: fix what the banner says, then Retry"
                        if failed is not None else "the session is still opening",
                        severity="warning")
            return False
        return True

    def open_failed(self) -> None:
        """The session could not open: nothing animates as if it were still on its way."""
        self.set_status("the session could not open · fix it, then Retry (q quits)")
        self.query_one(ProgressStrip).set_idle("not open")

    def start_rounds(self, n: int, *, recheck: bool = False) -> None:
        """Run ``n`` rounds in a worker; ``recheck``: ask the model server again first."""
        if self.round_running:
            self.notify("a round is already running (escape cancels it)", severity="warning")
            return
        self.round_running = True
        self.query_one(ErrorBanner).hide()
        self.run_rounds_worker(n, recheck)

    @work(thread=True, group="engine", exit_on_error=False)
    def run_rounds_worker(self, n: int, recheck: bool = False) -> None:
        try:
            if recheck:  # the engine asks the model server again when its address is set
                base_url = self.settings.base_url
                self.runner.call(lambda e: e.update_settings(base_url=base_url))
            self.runner.rounds(n)
        except Exception as exc:
            self.app.call_from_thread(self.report_error, exc, lambda: self.start_rounds(n))
        finally:
            self.app.call_from_thread(self._rounds_done)

    def _rounds_done(self) -> None:
        self.round_running = False
        strip = self.query_one(ProgressStrip)
        if strip.has_class("-busy"):  # keep RoundFinished's "cancelled" when it said so
            strip.set_idle()

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
        self.app.push_screen(ConfirmScreen("Accept this variant?", body), confirmed)

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
    def decide(self, what: Decision, record_id: str) -> None:
        if self.runner.busy:  # the engine takes one call at a time
            self.app.call_from_thread(self.notify, f"{what}: applied when the running round ends")
        try:
            if what == "accept":
                self.runner.call(lambda e: e.accept(record_id))
            elif what == "reject":
                self.runner.call(lambda e: e.reject(record_id))
            elif self.runner.call(lambda e: e.undo()) is None:
                self.app.call_from_thread(self.notify, "nothing to undo")
        except Exception as exc:
            self.app.call_from_thread(self.report_error, exc, None)
        self.refresh_records()

    # ── records and the selection ───────────────────────────────────────────
    @work(thread=True, group="records", exit_on_error=False)
    def refresh_records(self) -> None:
        try:
            records = self.runner.records()
        except Exception as exc:
            self.app.call_from_thread(self.report_error, exc, self.refresh_records)
            return
        if records is not None:
            self.post_message(RecordsLoaded(records))

    @on(RecordsLoaded)
    @guarded
    def show_records(self, message: RecordsLoaded) -> None:
        message.stop()  # handled here: it must not bubble back to the app, which forwards it
        table = self.query_one(VariantTable)
        newest = max(message.records, key=lambda r: (r.round, r.slot), default=None)
        fresh = newest is not None and newest.record_id not in table.records
        table.show_records(message.records, select=newest.record_id if fresh and newest else None)
        if self.select_best_next and table.select_best():
            self.select_best_next = False
        ok = [r.speedup for r in message.records if r.status == "ok" and r.speedup is not None]
        self.set_status(self.header_info.status,
                        best_speedup=max(ok) if ok else self.header_info.best_speedup)
        self.show_reference()
        for record in message.records:
            self._log_failure(record)
        chosen = table.selected_id()
        if chosen:
            self.show_variant(chosen)

    def _log_failure(self, record: CandidateRecord) -> None:
        if record.record_id in self._logged:
            return
        lines = failure_lines(record)
        if lines:
            self._logged.add(record.record_id)
        for line in lines:
            self.log_line(line)

    def clear_records(self) -> None:
        self.best_by_round.clear()
        self.query_one(VariantTable).show_records([])

    @on(VariantChosen)
    @guarded
    def _on_variant(self, message: VariantChosen) -> None:
        self.show_variant(message.record_id)

    def selected_record(self) -> CandidateRecord | None:
        table = self.query_one(VariantTable)
        chosen = table.selected_id()
        return table.records.get(chosen) if chosen else None

    def has_records(self) -> bool:
        return bool(self.query_one(VariantTable).records)

    @guarded
    def show_variant(self, record_id: str) -> None:
        record = self.query_one(VariantTable).records.get(record_id)
        if record is None:
            return
        self.query_one(DetailPane).show_record(record)
        self.query_one(ModelOutput).show_record(record)
        self.render_diff(record)
        self.show_reference()

    def show_reference(self) -> None:
        """The header's reference: the one the selected row's speedup divides by."""
        records = list(self.query_one(VariantTable).records.values())
        shown = header_reference(self.selected_record(), records)
        if shown is not None:
            self.set_status(self.header_info.status, reference_ms=shown.eager_ms,
                            reference_label=shown.label,
                            torch_compile_ms=shown.torch_compile_ms)

    # ── the diff, tabs and sorting ──────────────────────────────────────────
    def action_diff_base(self) -> None:
        index = DIFF_BASES.index(self.diff_base)
        self.diff_base = DIFF_BASES[(index + 1) % len(DIFF_BASES)]
        self.render_diff()
        self.notify(f"diff against {self.diff_base}", timeout=2)

    def action_diff_layout(self) -> None:
        self.diff_layout = "split" if self.diff_layout == "unified" else "unified"
        self.render_diff()

    def diff_base_source(self) -> tuple[str, str]:
        records = list(self.query_one(VariantTable).records.values())
        if self.diff_base == "best":
            ok = [r for r in records if r.status == "ok" and r.speedup is not None]
            if ok:
                best = max(ok, key=lambda r: r.speedup or 0.0)
                return f"best ({best.round}.{best.slot})", best.code
        if self.diff_base == "accepted":
            accepted = [r for r in records if r.decision == "accepted"]
            if accepted:
                last = accepted[-1]
                return f"accepted ({last.round}.{last.slot})", last.code
        note = "" if self.diff_base == "reference" else f" (no {self.diff_base} yet)"
        return "reference" + note, self.reference_source

    @guarded
    def render_diff(self, record: CandidateRecord | None = None) -> None:
        record = record or self.selected_record()
        if record is None:
            return
        label, base = self.diff_base_source()
        self.query_one(DetailPane).show_diff(label, base, record.code, self.diff_layout)

    def action_next_tab(self) -> None:
        self.query_one(DetailPane).cycle_tab(1)

    def action_previous_tab(self) -> None:
        self.query_one(DetailPane).cycle_tab(-1)

    def action_sort(self, column: str) -> None:
        self.query_one(VariantTable).sort_by(column)

    def action_select_best(self) -> None:
        if not self.query_one(VariantTable).select_best():
            self.notify("no verified variant yet")
