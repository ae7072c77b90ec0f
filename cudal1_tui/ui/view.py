"""The app's body: layout, engine plumbing and rendering of engine events.

Every blocking engine call runs in a thread worker; the actions live in ``app.py``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any, ClassVar, TypeVar, cast

from textual import on, work
from textual.app import App, ComposeResult
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.widgets import Footer, RichLog

from cudal1_tui.config import Settings
from cudal1_tui.engine import events as ev
from cudal1_tui.errors import Cudal1Error
from cudal1_tui.store.records import CandidateRecord
from cudal1_tui.ui.baseline import latest_times
from cudal1_tui.ui.diffing import Layout
from cudal1_tui.ui.display import DisplayOptions
from cudal1_tui.ui.engine_port import EngineFactory, Sizes, real_engine_factory
from cudal1_tui.ui.format import device_text, record_flags
from cudal1_tui.ui.messages import EngineEventPosted, RecordsLoaded, RetryRequested, VariantChosen
from cudal1_tui.ui.runner import EngineRunner
from cudal1_tui.ui.widgets.banner import ErrorBanner
from cudal1_tui.ui.widgets.chart import SpeedupChart
from cudal1_tui.ui.widgets.detail import DetailPane
from cudal1_tui.ui.widgets.header import HeaderBar, HeaderInfo
from cudal1_tui.ui.widgets.output import ModelOutput
from cudal1_tui.ui.widgets.stage_progress import ProgressStrip
from cudal1_tui.ui.widgets.variants import VariantTable
from cudal1_tui.uncertainty import machine_busy

F = TypeVar("F", bound=Callable[..., None])

DIFF_BASES = ("reference", "best", "accepted")
LOG_KEEP = 5000


def guarded(handler: F) -> F:
    """Render failures on the UI thread go to the banner and Logs, never a traceback."""

    @wraps(handler)
    def safe(self: SessionView, *args: Any) -> None:
        try:
            handler(self, *args)
        except NoMatches:
            pass  # a late message while the app shuts down: its widgets are gone
        except Exception as exc:
            self.report_error(exc, None)

    return cast(F, safe)


class SessionView(App[int]):
    CSS_PATH = "styles/app.tcss"
    TITLE = "cudal1-tui"
    KEYMAP_IDS: ClassVar[frozenset[str]] = frozenset()
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]  # noqa: RUF012 (Textual's)

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
        self.header_info = HeaderInfo(problem=problem_path.stem, status="opening the session…")
        self.reference_source = ""
        self.best_by_round: dict[int, float] = {}
        self.diff_base = DIFF_BASES[0]
        self.diff_layout: Layout = "unified"
        self.retry: Callable[[], object] | None = None
        self._logged: set[str] = set()
        self.quitting = False
        self.closed_session: tuple[str, str] | None = None  # (id, path) for the exit line
        self.round_running = False
        self._select_best = False  # a round just finished: move to its fastest row
        self.log_history: list[str] = []  # what the Logs tab shows, as plain text
        self.set_keymap({k: v for k, v in settings.keys.items() if k in self.KEYMAP_IDS})

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
        self.call_after_refresh(self._first_frame)

    def _first_frame(self) -> None:
        self.first_frame_ms = (time.perf_counter() - self._started) * 1000
        self.first_frame_at = time.time()
        if self._measure_startup:
            self.exit(0)
        elif self._autostart:
            self.open_session(self.problem_path, self._resume)

    # ── engine plumbing ─────────────────────────────────────────────────────
    def _emit(self, event: ev.EngineEvent) -> None:
        """Called by the engine on its worker thread: hand over to the UI thread."""
        self.post_message(EngineEventPosted(event))

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

    @work(thread=True, group="engine", exit_on_error=False)
    def open_session(self, problem_path: Path, resume: str | Path | None) -> None:
        try:
            engine = self.runner.open(problem_path, resume)
        except Exception as exc:
            retry = lambda: self.open_session(problem_path, resume)  # noqa: E731
            self.call_from_thread(self.report_error, exc, retry)
            self.call_from_thread(self.set_status, "the session could not open")
            return
        self.call_from_thread(self._opened, engine.problem_source, engine.session_id)
        self.refresh_records()

    def _opened(self, problem_source: str, session_id: str) -> None:
        self.reference_source = problem_source
        engine = self.runner.engine
        self.set_status(
            "ready · n: next round, ?: help",
            session_id=session_id,
            device=self.header_info.device or (engine.device if engine else ""),
            reference_ms=engine.reference_ms if engine else None,
        )
        self.query_one(ProgressStrip).set_idle()

    @work(thread=True, group="engine", exit_on_error=False)
    def run_rounds_worker(self, n: int, recheck: bool = False) -> None:
        try:
            if recheck:  # the engine asks the model server again when its address is set
                base_url = self.settings.base_url
                self.runner.call(lambda e: e.update_settings(base_url=base_url))
            self.runner.rounds(n)
        except Exception as exc:
            self.call_from_thread(self.report_error, exc, lambda: self.start_rounds(n))
        finally:
            self.call_from_thread(self._rounds_done)

    def start_rounds(self, n: int, *, recheck: bool = False) -> None:
        """Run ``n`` rounds in a worker; ``recheck``: ask the model server again first."""
        if self.round_running:
            self.notify("a round is already running (escape cancels it)", severity="warning")
            return
        self.round_running = True
        self.query_one(ErrorBanner).hide()
        self.run_rounds_worker(n, recheck)

    def _rounds_done(self) -> None:
        self.round_running = False
        strip = self.query_one(ProgressStrip)
        if strip.has_class("-busy"):  # keep RoundFinished's "cancelled" when it said so
            strip.set_idle()

    @work(thread=True, group="records", exit_on_error=False)
    def refresh_records(self) -> None:
        try:
            records = self.runner.records()
        except Exception as exc:
            self.call_from_thread(self.report_error, exc, self.refresh_records)
            return
        if records is not None:
            self.post_message(RecordsLoaded(records))

    # ── engine events ───────────────────────────────────────────────────────
    @on(EngineEventPosted)
    @guarded
    def _on_engine_event(self, message: EngineEventPosted) -> None:
        event = message.event
        handler = getattr(self, f"_event_{type(event).__name__}", None)
        if handler is not None:
            handler(event)

    def _event_SessionOpened(self, event: ev.SessionOpened) -> None:
        verb = "resumed" if event.resumed else "opened"
        self.set_status(f"session {verb}", session_id=event.session_id, problem=event.problem_name)
        self.log_line(f"session {verb}: {event.path}")

    def _event_ProbeFinished(self, event: ev.ProbeFinished) -> None:
        self.set_status("probed" if event.ok else "the probe failed",
                        device=device_text(event.device, event.details),
                        reference_ms=self.header_info.reference_ms or event.reference_ms,
                        torch_compile_ms=self.header_info.torch_compile_ms
                        or event.torch_compile_ms)
        self.log_line(f"probe: {event.message}")
        shapes = ", ".join(f"{tuple(t.get('shape', ()))} {t.get('dtype', '')}"
                           for t in event.details.get("inputs", []) or [])
        if shapes:
            cpu = " (CPU sizes)" if event.details.get("cpu_sizes") else ""
            self.log_line(f"inputs{cpu}: {shapes}")
        if not event.ok:
            self.query_one(ErrorBanner).show(event.message, "fix the problem file, then retry")
            self.retry = lambda: self.open_session(self.problem_path, self._resume)

    def _event_RoundStarted(self, event: ev.RoundStarted) -> None:
        self.set_status(f"round {event.round}: {event.slots} candidates · escape cancels")

    def _event_StageChanged(self, event: ev.StageChanged) -> None:
        self.query_one(ProgressStrip).on_stage(event)

    def _event_StreamChunk(self, event: ev.StreamChunk) -> None:
        self.query_one(ModelOutput).on_chunk(event)
        self.query_one(ProgressStrip).on_chunk(event)

    def _event_CandidateFinished(self, event: ev.CandidateFinished) -> None:
        self.query_one(ModelOutput).slot_finished(event.round, event.slot)
        shown = self.display_options
        speed = f" {shown.speedup(event.speedup)}" if event.speedup is not None else ""
        flags = f" flags: {', '.join(event.flags)}" if event.flags else ""
        where = f"round {event.round}.{event.slot} {event.source}"
        self.log_line(f"{where}: {event.status}{speed}{flags}")
        self.refresh_records()

    def _event_RoundFinished(self, event: ev.RoundFinished) -> None:
        if event.best_speedup is not None:
            self.best_by_round[event.round] = event.best_speedup
        self.query_one(SpeedupChart).show([v for _, v in sorted(self.best_by_round.items())])
        self.query_one(ModelOutput).end_live()
        self.query_one(ProgressStrip).set_idle("cancelled" if event.cancelled else "idle")
        done = "cancelled" if event.cancelled else "finished"
        self.set_status(f"round {event.round} {done} · fastest row selected · a: accept, "
                        "n: next round",
                        best_speedup=event.best_speedup or self.header_info.best_speedup)
        self._select_best = True
        self.refresh_records()
        busy = machine_busy() if self.round_running else ""  # a round timed here, now
        if busy:
            self.log_line(f"warning: {busy}")
            self.notify(busy, severity="warning")

    def _event_EngineError(self, event: ev.EngineError) -> None:
        # no model while the built-in proposer runs is the documented default, not a failure
        builtin_only = event.round == 0 and self.settings.use_builtin
        self.query_one(ErrorBanner).show(event.message, event.fix, retry=event.recoverable,
                                         severity="info" if builtin_only else "error")
        self.retry = (lambda: self.start_rounds(1, recheck=True)) if event.recoverable else None
        fix = f" (fix: {event.fix})" if event.fix else ""
        self.log_line(f"engine error: {event.message}{fix}")

    def _event_DecisionRecorded(self, event: ev.DecisionRecorded) -> None:
        commit = f" as {event.commit[:10]}" if event.commit else ""
        self.log_line(f"{event.record_id}: {event.decision}{commit}")
        self.notify(f"{event.decision}{commit}", title="decision recorded")
        self.refresh_records()

    # ── records and the selection ───────────────────────────────────────────
    @on(RecordsLoaded)
    @guarded
    def _on_records(self, message: RecordsLoaded) -> None:
        table = self.query_one(VariantTable)
        newest = max(message.records, key=lambda r: (r.round, r.slot), default=None)
        fresh = newest is not None and newest.record_id not in table.records
        table.show_records(message.records, select=newest.record_id if fresh and newest else None)
        if self._select_best and table.select_best():
            self._select_best = False
        ok = [r.speedup for r in message.records if r.status == "ok" and r.speedup is not None]
        eager, compiled = latest_times(message.records)
        self.set_status(self.header_info.status,
                        best_speedup=max(ok) if ok else self.header_info.best_speedup,
                        reference_ms=eager or self.header_info.reference_ms,
                        torch_compile_ms=compiled or self.header_info.torch_compile_ms)
        for record in message.records:
            self._log_failure(record)
        chosen = table.selected_id()
        if chosen:
            self.show_variant(chosen)

    def _log_failure(self, record: CandidateRecord) -> None:
        if record.record_id in self._logged or (record.status == "ok" and not record_flags(record)):
            return
        self._logged.add(record.record_id)
        result = record.result
        self.log_line(f"── {record.round}.{record.slot} {record.source}: {record.status}")
        for line in (record.parse_error, str(result.get("message", ""))):
            if line:
                self.log_line(line)
        for flag in result.get("flags", []) or []:
            self.log_line(f"integrity {flag.get('code')}: {flag.get('reason')}")
        for finding in record.gate_findings:
            self.log_line(f"static gate: {finding}")
        compile_log = str(result.get("compile_log", "")).strip()
        if compile_log and record.status == "compile_error":
            self.log_line(compile_log[-4000:])

    @on(VariantChosen)
    @guarded
    def _on_variant(self, message: VariantChosen) -> None:
        self.show_variant(message.record_id)

    def selected_record(self) -> CandidateRecord | None:
        table = self.query_one(VariantTable)
        chosen = table.selected_id()
        return table.records.get(chosen) if chosen else None

    @guarded
    def show_variant(self, record_id: str) -> None:
        record = self.query_one(VariantTable).records.get(record_id)
        if record is None:
            return
        detail = self.query_one(DetailPane)
        detail.show_record(record)
        self.query_one(ModelOutput).show_record(record)
        self.render_diff(record)

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
