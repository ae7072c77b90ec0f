"""One candidate through the pipeline of ``engine.pool``: gate and build, then evaluate.

Build stage (a build thread; only for candidates that compile an extension): the static
gate, then the sandboxed build, announced as ``compiling`` with the round's build count
(``done``/``total``). A gate rejection or a failed build is the candidate's verdict and is
recorded without taking the device. Evaluate stage (the pool's evaluate thread, holding the
device): the gate for candidates that skipped the build stage, then the evaluator, whose
progress becomes ``verifying``/``timing``; on a GPU the model server shares, the evaluation
first waits for the model's streams to end and checks the GPU's free memory
(``engine.gpu_share``). Both stages watch the workspace's cancel event
and hand it to the evaluator's subprocesses.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from concurrent.futures import Future

from cudal1_evaluator.schema import Job, Result
from cudal1_tui.engine.abandon import Abandoned, unless_cancelled
from cudal1_tui.engine.events import EngineError, Stage, StageChanged
from cudal1_tui.engine.jobs import candidate_job
from cudal1_tui.engine.recording import Draft
from cudal1_tui.engine.workspace import Workspace
from cudal1_tui.errors import Cudal1Error
from cudal1_tui.judging import Prepared, needs_build
from cudal1_tui.records import CandidateRecord

BUILD_STARTED = "building the candidate's extension"
Record = Callable[[Draft, Result], CandidateRecord]
Report = Callable[[int, Exception], None]
Progress = Callable[[str, int, int, str], None]
FAILURES = (Cudal1Error, OSError, ValueError)
DOCTOR_FIX = "check the settings; `cudal1-tui doctor` checks the toolchain"

_STAGE_WORDS: tuple[tuple[tuple[str, ...], Stage], ...] = (
    (("gate", "static"), "gating"),
    (("compil", "build", "load", "import"), "compiling"),
    (("tim", "bench", "reference"), "timing"),
    (("verif", "correct", "check", "trial", "recheck", "strict"), "verifying"),
)


def stage_of(evaluator_stage: str) -> Stage:
    word = evaluator_stage.lower()
    for keys, stage in _STAGE_WORDS:
        if any(k in word for k in keys):
            return stage
    return "verifying"


def on_lane(job: Job, device: str) -> Job:
    """The job as it runs on a lane: that lane's device (``cuda:1``) instead of the session's
    (``cuda``); everything else, its inputs' seeds included, as built."""
    return job if job.device == device else dataclasses.replace(job, device=device)


class Stages:
    def __init__(self, ws: Workspace, round_: int, record: Record, report: Report) -> None:
        self.ws, self.round = ws, round_
        self._record, self._report = record, report
        self._lock = threading.Lock()
        self._builds_total = 0
        self._builds_done = 0

    def queue(self, draft: Draft) -> Future[CandidateRecord | None]:
        job = self._job(draft)
        if not needs_build(draft.code):
            return self.ws.pool.submit(None, lambda _: self._evaluate_guarded(draft, job, None))
        with self._lock:
            self._builds_total += 1
        return self.ws.pool.submit(lambda: self._build_guarded(draft, job),
                                   lambda built: self._evaluate_guarded(draft, job, built))

    def _job(self, draft: Draft) -> Job:
        ws = self.ws
        return candidate_job(ws.settings, problem_source=ws.problem.eval_source,
                             problem_name=ws.problem.name, code=draft.code, device=ws.device,
                             job_id=draft.record_id, build_root=ws.build_root,
                             cuda_arch=ws.cuda_arch)

    # -- build stage -------------------------------------------------------------------

    def _build_guarded(self, draft: Draft, job: Job) -> Prepared | None:
        try:
            return self._build(draft, job)
        except Exception as exc:
            self._report(draft.slot, exc)
            return None
        finally:
            with self._lock:
                self._builds_done += 1

    def _build(self, draft: Draft, job: Job) -> Prepared | None:
        ws = self.ws
        if ws.cancel.is_set():
            return None
        self._stage(draft.slot, "gating", "static checks")
        prepared = self._gate(job)
        if prepared is None or prepared.verdict is not None:
            return prepared
        done, total = self._build_count()
        self._stage(draft.slot, "compiling", BUILD_STARTED, done, total)
        try:
            prepared = ws.judge.build(job, prepared, ws.cancel)
        except FAILURES as exc:
            self._failed(draft, exc)
            return None
        outcome = prepared.build
        if outcome is not None and not ws.cancel.is_set():
            how = "cached" if outcome.cached else f"{outcome.compile_time_s:.1f} s"
            done, total = self._build_count()
            self._stage(draft.slot, "compiling", f"build {outcome.status} ({how})", done + 1,
                        total)
        return prepared

    def _gate(self, job: Job) -> Prepared | None:
        """The static gate, abandoned at a cancel (a huge candidate takes seconds)."""
        try:
            return unless_cancelled(lambda: self.ws.judge.gate(job), self.ws.cancel, "gate")
        except Abandoned:
            return None

    def _build_count(self) -> tuple[int, int]:
        with self._lock:
            return self._builds_done, self._builds_total

    # -- evaluate stage ----------------------------------------------------------------

    def _evaluate_guarded(self, draft: Draft, job: Job,
                          built: Prepared | None) -> CandidateRecord | None:
        try:
            return self._evaluate(draft, job, built)
        except Exception as exc:
            self._report(draft.slot, exc)
            return None

    def _evaluate(self, draft: Draft, job: Job, built: Prepared | None) -> CandidateRecord | None:
        ws = self.ws
        if ws.cancel.is_set():
            return None
        if needs_build(draft.code) and built is None:
            return None  # the build stage reported why (or was cancelled)
        prepared = built
        if prepared is None:
            self._stage(draft.slot, "gating", "static checks")
            prepared = self._gate(job)
            if prepared is None:
                return None  # cancelled mid-gate
        if prepared.verdict is not None:
            return self._record(draft, prepared.verdict)  # no device needed

        def progress(stage: str, done: int, total: int, detail: str) -> None:
            self._stage(draft.slot, stage_of(stage), detail or stage, done, total)

        def waiting(message: str) -> None:
            self._stage(draft.slot, "verifying", message)

        with ws.pool.on_lane(waiting, ws.cancel) as device:
            if device is None:
                return None  # cancelled while another session held the device
            result = self._on_device(draft, on_lane(job, device), prepared, progress, waiting)
        if result is None or ws.cancel.is_set():
            return None  # cut short: its verdict would not be a real one
        return self._record(draft, result)

    def _on_device(self, draft: Draft, job: Job, prepared: Prepared, progress: Progress,
                   waiting: Callable[[str], None]) -> Result | None:
        """The evaluation on the lane held: once the model server is quiet on a GPU it
        shares, and with room on the GPU; None when cancelled or failed (reported)."""
        ws = self.ws
        with ws.share.timing(draft.record_id, job.device, waiting, ws.cancel) as quiet:
            if not quiet:
                return None  # cancelled while the model generated
            try:
                ws.share.check_memory(job.device)
                return ws.judge.evaluate(job, prepared, on_progress=progress, cancel=ws.cancel)
            except FAILURES as exc:
                self._failed(draft, exc)
                return None

    def _failed(self, draft: Draft, exc: Exception) -> None:
        if not self.ws.cancel.is_set():
            fix = getattr(exc, "fix", "") or DOCTOR_FIX
            self.ws.emit(EngineError(f"evaluating {draft.record_id} failed: {exc}", fix,
                                     self.round, True))

    def _stage(self, slot: int, stage: Stage, detail: str = "", done: int = 0,
               total: int = 0) -> None:
        self.ws.emit(StageChanged(self.round, slot, stage, detail, done, total))
