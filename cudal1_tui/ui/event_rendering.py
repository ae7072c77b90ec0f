"""How the session screen shows each engine event: one ``match``, checked exhaustive by mypy.

A new event type in ``engine.events.EngineEvent`` that is not handled here fails
``mypy --strict`` at the ``assert_never`` below.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, assert_never

from cudal1_tui.engine import events as ev
from cudal1_tui.ui.baseline import PROBE_LABEL
from cudal1_tui.ui.format import device_text, status_text
from cudal1_tui.ui.widgets.banner import ErrorBanner
from cudal1_tui.ui.widgets.chart import SpeedupChart
from cudal1_tui.ui.widgets.output import ModelOutput
from cudal1_tui.ui.widgets.stage_progress import ProgressStrip
from cudal1_tui.uncertainty import machine_busy

if TYPE_CHECKING:
    from cudal1_tui.ui.screens.session_screen import SessionScreen


def render_event(screen: SessionScreen, event: ev.EngineEvent) -> None:
    match event:
        case ev.SessionOpened():
            _session_opened(screen, event)
        case ev.ProbeFinished():
            _probe_finished(screen, event)
        case ev.RoundStarted():
            screen.set_status(f"round {event.round}: {event.slots} candidates · escape cancels")
        case ev.StageChanged():
            screen.query_one(ProgressStrip).on_stage(event)
        case ev.StreamChunk():
            screen.query_one(ModelOutput).on_chunk(event)
            screen.query_one(ProgressStrip).on_chunk(event)
        case ev.CandidateFinished():
            _candidate_finished(screen, event)
        case ev.RoundFinished():
            _round_finished(screen, event)
        case ev.EngineError():
            _engine_error(screen, event)
        case ev.DecisionRecorded():
            _decision_recorded(screen, event)
        case _:
            assert_never(event)


def _session_opened(screen: SessionScreen, event: ev.SessionOpened) -> None:
    verb = "resumed" if event.resumed else "opened"
    screen.set_status(f"session {verb}", session_id=event.session_id, problem=event.problem_name)
    screen.log_line(f"session {verb}: {event.path}")


def _probe_finished(screen: SessionScreen, event: ev.ProbeFinished) -> None:
    info = screen.header_info
    screen.set_status("probed" if event.ok else "the probe failed",
                      device=device_text(event.device, event.details),
                      reference_ms=(event.reference_ms if info.reference_label == PROBE_LABEL
                                    else info.reference_ms),
                      torch_compile_ms=info.torch_compile_ms or event.torch_compile_ms)
    screen.log_line(f"probe: {event.message}")
    inputs = event.details.inputs if event.details is not None else []
    shapes = ", ".join(f"{tuple(t.shape)} {t.dtype}" for t in inputs)
    if shapes:
        cpu = " (CPU sizes)" if event.cpu_sizes else ""
        screen.log_line(f"inputs{cpu}: {shapes}")
    if not event.ok:
        screen.query_one(ErrorBanner).show(event.message, "fix the problem file, then retry")
        screen.retry = screen.reopen


def _candidate_finished(screen: SessionScreen, event: ev.CandidateFinished) -> None:
    screen.query_one(ModelOutput).slot_finished(event.round, event.slot)
    shown = screen.display_options
    speed = f" {shown.speedup(event.speedup)}" if event.speedup is not None else ""
    flags = f" flags: {', '.join(event.flags)}" if event.flags else ""
    where = f"round {event.round}.{event.slot} {event.source}"
    screen.log_line(f"{where}: {status_text(event.status, event.flags)}{speed}{flags}")
    screen.refresh_records()


def _round_finished(screen: SessionScreen, event: ev.RoundFinished) -> None:
    if event.best_speedup is not None:
        screen.best_by_round[event.round] = event.best_speedup
    screen.query_one(SpeedupChart).show([v for _, v in sorted(screen.best_by_round.items())])
    screen.query_one(ModelOutput).end_live()
    screen.query_one(ProgressStrip).set_idle("cancelled" if event.cancelled else "idle")
    done = "cancelled" if event.cancelled else "finished"
    screen.set_status(f"round {event.round} {done} · fastest row selected · a: accept, "
                      "n: next round",
                      best_speedup=event.best_speedup or screen.header_info.best_speedup)
    screen.select_best_next = True
    screen.refresh_records()
    busy = machine_busy() if screen.round_running else ""  # a round timed here, now
    if busy:
        screen.log_line(f"warning: {busy}")
        screen.notify(busy, severity="warning")


def _engine_error(screen: SessionScreen, event: ev.EngineError) -> None:
    # no model while the built-in proposer runs is the documented default, not a failure
    builtin_only = event.round == 0 and screen.settings.use_builtin
    info = builtin_only or event.severity == "info"
    screen.query_one(ErrorBanner).show(event.message, event.fix, retry=event.recoverable,
                                       severity="info" if info else "error")
    if event.round and info:  # no round ran: the status says why, not "round … finished"
        screen.set_status("nothing new to try · start a model server, then Retry")
    screen.retry = (lambda: screen.start_rounds(1, recheck=True)) if event.recoverable else None
    fix = f" (fix: {event.fix})" if event.fix else ""
    screen.log_line(f"engine error: {event.message}{fix}")


def _decision_recorded(screen: SessionScreen, event: ev.DecisionRecorded) -> None:
    commit = f" as {event.commit[:10]}" if event.commit else ""
    screen.log_line(f"{event.record_id}: {event.decision}{commit}")
    screen.notify(f"{event.decision}{commit}", title="decision recorded")
    screen.refresh_records()
