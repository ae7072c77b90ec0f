"""The engine: one object that runs the optimization loop and emits events.

The TUI and the headless runner drive it the same way and only render its events.
Every public method is called from one controlling thread except ``cancel``, which
is thread-safe; ``emit`` is called from worker threads too.
"""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path
from typing import Any, Literal

from cudal1_evaluator.schema import ProbeResult
from cudal1_tui.config import Settings, build_dir
from cudal1_tui.engine import opening
from cudal1_tui.engine.events import (
    DecisionRecorded,
    EngineError,
    EngineEvent,
)
from cudal1_tui.engine.fleet import Fleet
from cudal1_tui.engine.generate import ModelGateway
from cudal1_tui.engine.pool import EvalPool
from cudal1_tui.engine.recording import torch_compile_ms
from cudal1_tui.engine.round import RoundRunner, RoundSummary
from cudal1_tui.engine.share_setup import share_for_lanes
from cudal1_tui.engine.workspace import Emit, Workspace
from cudal1_tui.errors import ConfigError, SessionError
from cudal1_tui.judging import JUDGE
from cudal1_tui.prompting import load_templates
from cudal1_tui.proposers import BuiltinCandidate, propose
from cudal1_tui.records import CandidateRecord

Sizes = Literal["auto", "full", "cpu"]
UPDATABLE = frozenset({"model", "temperature", "top_p", "max_tokens", "candidates_per_round",
                       "exemplars", "base_url", "api_key", "use_builtin"})
NOTHING_NEW = ("nothing new to try: every built-in strategy for this problem has been "
               "evaluated in this session ({done}), and no model is available")
NO_PROPOSER = "nothing to try: no model is available and the built-in proposer is off"
NOTHING_NEW_FIX = "start a model server (vLLM, SGLang, llama.cpp, Ollama) and set OPENAI_BASE_URL"


class Engine:
    def __init__(self, problem_path: Path, settings: Settings, *, emit: Emit,
                 resume: str | Path | None = None, sizes: Sizes = "auto",
                 fleet: Fleet | None = None) -> None:
        """``fleet``: lanes, build threads and judge shared with other engines of one run
        (``cudal1-tui run DIR --headless``); without it the engine has its own pool on its
        one device."""
        self.problem_path = Path(problem_path)
        self.settings = dataclasses.replace(settings)
        self.resume = resume
        self.sizes: Sizes = sizes
        self.fleet = fleet
        self._emit_lock = threading.Lock()
        self._user_emit = emit
        self._round_lock = threading.Lock()
        self._stop = threading.Event()  # a cancel also ends a run of several rounds
        self._running: RoundRunner | None = None  # the round in progress, for cancel_slot
        self._ws: Workspace | None = None
        self.session_id = ""
        self.session_path: Path | None = None
        self.problem_name = self.problem_path.stem
        self.problem_source = ""
        self.reference_ms: float | None = None
        self.torch_compile_ms: float | None = None
        self.device = ""
        self.model_available = False
        self.last_error = ""
        self._probe: ProbeResult | None = None

    # -- lifetime ------------------------------------------------------------------------

    def emit(self, event: EngineEvent) -> None:
        if isinstance(event, EngineError):
            self.last_error = event.message
        with self._emit_lock:
            self._user_emit(event)

    def open(self) -> None:
        """Inspect, probe, create or resume the session, check the model server."""
        fleet = self.fleet
        holder = f"problem {self.problem_name}"
        probe = None if fleet is None else (lambda job: fleet.probe(job, holder))
        opened = opening.open_workspace(self.problem_path, self.settings, self.resume,
                                        self.sizes, self.emit, probe, sweep=fleet is None)
        holder = f"session {opened.session.id}"
        ws = Workspace(
            settings=self.settings, session=opened.session, problem=opened.problem,
            # The evaluator keys each build by a hash of the candidate: one shared root lets
            # a candidate seen before (another session, a re-evaluation) compile nothing.
            device=opened.device, build_root=build_dir(self.settings),
            templates=load_templates(), gateway=ModelGateway(self.settings),
            pool=EvalPool(opened.device, holder=holder) if fleet is None else fleet.pool(holder),
            emit=self.emit, reference_ms=opened.reference_ms,
            cuda_arch=opened.cuda_arch, judge=JUDGE if fleet is None else fleet.judge)
        self._ws = ws
        self._probe = opened.probe
        self.session_id, self.session_path = ws.session.id, ws.session.path
        self.problem_name, self.problem_source = ws.problem.name, ws.problem.eval_source
        self.reference_ms, self.device = opened.reference_ms, opened.device
        self._note_compile_time()
        self._check_model()

    def close(self) -> None:
        ws, self._ws = self._ws, None
        if ws is None:
            return
        ws.cancel.set()
        with self._round_lock:  # a running round sees the cancel and returns
            ws.pool.shutdown()
            ws.gateway.close()
            ws.session.close()

    # -- rounds --------------------------------------------------------------------------

    def run_round(self) -> RoundSummary:
        ws = self._workspace()
        with self._round_lock:
            ws.cancel.clear()
            round_ = ws.session.next_round()
            builtins = self._pending_builtins(ws)
            model_slots = self.settings.candidates_per_round if self.model_available else 0
            if not model_slots:  # built-in only: a round's worth each, while any is left
                builtins = builtins[:max(1, self.settings.candidates_per_round)]
            if not builtins and model_slots <= 0:
                return self._nothing_to_do(round_)
            self._running = RoundRunner(ws, round_)
            try:
                summary = self._running.run(builtins, model_slots)
            finally:
                self._running = None
            self._note_compile_time()
            return summary

    def run_rounds(self, n: int) -> list[RoundSummary]:
        """Up to ``n`` rounds; stops early when cancelled or when there is nothing to try."""
        out: list[RoundSummary] = []
        self._stop.clear()
        for _ in range(n):
            if self._stop.is_set():
                break
            summary = self.run_round()
            out.append(summary)
            if summary.cancelled or summary.nothing_to_do:
                break
        return out

    def cancel(self) -> None:
        """Stop the running stage (model stream, evaluator process); ends ``run_rounds``."""
        self._stop.set()
        ws = self._ws
        if ws is not None:
            ws.cancel.set()

    def cancel_slot(self, slot: int) -> bool:
        """Stop one model slot of the running round (thread-safe); False when none streams."""
        running = self._running
        return running is not None and running.cancel_slot(slot)

    @property
    def stop_requested(self) -> bool:
        """``cancel`` was called since the last ``run_rounds`` began."""
        return self._stop.is_set()

    def _nothing_to_do(self, round_: int) -> RoundSummary:
        if self.settings.candidates_per_round <= 0 and self.model_available:
            message, fix = "candidates_per_round is 0: the model is asked for nothing", \
                "set candidates per round to 1 or more"
        elif not self.settings.use_builtin:
            message, fix = NO_PROPOSER, NOTHING_NEW_FIX + ", or drop --no-builtin"
        else:
            message, fix = NOTHING_NEW.format(done=self._builtins_done()), NOTHING_NEW_FIX
        best = self.best()
        # said plainly, as a fact: no round starts, none is charted, nothing failed
        self.emit(EngineError(message, fix, round_, True, severity="info"))
        return RoundSummary(round_, [], best.speedup if best else None, message=message,
                            nothing_to_do=True)

    def _builtins_done(self) -> str:
        done = sorted({r.source.removeprefix("builtin:") for r in self._workspace().records()
                       if r.source.startswith("builtin:")})
        return ", ".join(done) or "none applies"

    def _pending_builtins(self, ws: Workspace) -> list[BuiltinCandidate]:
        """The built-in candidates not yet in the session (each runs once per session)."""
        if not self.settings.use_builtin:
            return []
        done = {r.source for r in ws.records()}
        proposed = propose(ws.problem.eval_source, ws.problem.inspection, ws.device)
        return [c for c in proposed if c.source not in done]

    def _note_compile_time(self) -> None:
        self.torch_compile_ms = torch_compile_ms(self.records()) or self.torch_compile_ms

    # -- decisions -----------------------------------------------------------------------

    def accept(self, record_id: str) -> str:
        ws = self._workspace()
        with ws.write_lock:
            sha = ws.session.accept(record_id)
        self.emit(DecisionRecorded(record_id, "accepted", sha))
        return sha

    def reject(self, record_id: str) -> None:
        ws = self._workspace()
        with ws.write_lock:
            ws.session.reject(record_id)
        self.emit(DecisionRecorded(record_id, "rejected"))

    def undo(self) -> str | None:
        ws = self._workspace()
        with ws.write_lock:
            live = ws.session.accepted()
            sha = ws.session.undo()
        if sha is not None and live is not None:
            self.emit(DecisionRecorded(live.record_id, "undone", sha))
        return sha

    # -- reading -------------------------------------------------------------------------

    def records(self) -> list[CandidateRecord]:
        return self._workspace().records()

    def best(self) -> CandidateRecord | None:
        return self._workspace().best()

    def accepted(self) -> CandidateRecord | None:
        ws = self._workspace()
        with ws.write_lock:
            return ws.session.accepted()

    # -- settings ------------------------------------------------------------------------

    def update_settings(self, **changes: Any) -> None:
        """Change model or sampling knobs; takes effect from the next round."""
        unknown = set(changes) - UPDATABLE
        if unknown:
            raise SessionError(f"cannot change {', '.join(sorted(unknown))} during a session",
                               fix=f"changeable: {', '.join(sorted(UPDATABLE))}")
        count = changes.get("candidates_per_round", 0)
        if not isinstance(count, int) or count < 0:
            raise ConfigError(f"candidates_per_round must be a whole number >= 0, got {count!r}")
        for name, value in changes.items():
            setattr(self.settings, name, value)
        if self._ws is not None and {"model", "base_url", "api_key"} & set(changes):
            self._check_model()

    def _check_model(self) -> None:
        ws = self._workspace()
        availability = ws.gateway.check()
        self.model_available = availability.ok
        if availability.ok:
            with ws.write_lock:
                ws.session.update_meta(model=availability.model)
        else:
            self.emit(EngineError(availability.message, availability.fix, 0, True))
        self._share_gpu(ws)

    def _share_gpu(self, ws: Workspace) -> None:
        """Which GPUs the model server uses; timing waits for it where it shares ours."""
        ws.share = share_for_lanes(self.settings, ws.session.path, self._probe,
                                   ws.pool.lanes, self.emit)

    def _workspace(self) -> Workspace:
        if self._ws is None:
            raise SessionError("the engine has no open session", fix="call open() first")
        return self._ws
