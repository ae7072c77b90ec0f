"""The worker child: build, verify and time one candidate, then report raw data.

Phases: setup (device, clock, pristine problem and reference model, all before
the candidate is imported) -> build (import the candidate, compile, construct
ModelNew with equal weights) -> lock down -> correctness -> timing -> profile.
A "profile" child runs setup, build and lock down, then the profile alone.
Any failure ends the run with a report; the parent decides the verdict.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from evaluator import checks, envinfo, integrity
from evaluator.builder import build_dir_of
from evaluator.channel import WorkerChannel
from evaluator.compare import describe_tolerance
from evaluator.harness import Harness, SetupError, load_source, plan_of
from evaluator.report import RawTiming, WorkerReport
from evaluator.schema import Flag, Job, TrialReport

BLOCKED = "blocked by the evaluator"


class _Stop(Exception):
    """A phase ended the run; the report already says why."""


class Worker:
    def __init__(self, job: Job, channel: WorkerChannel, report: WorkerReport) -> None:
        self.job, self.ch, self.rep = job, channel, report
        self.build_path = ""
        self.guard: integrity.Guard | None = None

    def phase(self, name: str, step: Callable[[], None]) -> None:
        """Run one phase, recording its wall time (also when it stops the run)."""
        self.rep.phase = name
        started = time.monotonic()
        try:
            step()
        finally:
            self.rep.phases[name] = round(time.monotonic() - started, 4)

    # -- setup -------------------------------------------------------------------------
    def setup(self) -> None:
        try:
            self.h = Harness(self.job)
            self.rep.device = envinfo.device_info(self.h.device)
            self.rep.versions = envinfo.versions()
            self.reference = self.h.reference_model()
        except SetupError as exc:
            self.rep.fail("setup", str(exc))
            raise _Stop from None
        self.rep.tolerance = {**describe_tolerance(self.job.tolerance),
                              "baseline_settings": self.h.baseline_settings}
        # every check used after the candidate import, bound before it
        self.fn = checks.capture()
        self.bdir = build_dir_of(self.job, self.h.device)
        self.build_path = str(self.bdir.path)
        # writes only to this candidate's own build dir: never into another's cached build
        self.guard = integrity.install_guards([self.build_path, str(self.h.workdir)])
        # bound methods: patching the Guard class later does not reach these
        self._guard_lock, self._guard_findings = self.guard.lock_down, self.guard.findings
        self.globals0 = self.fn.snapshot_globals()
        self.settings0 = self.fn.snapshot_settings()

    # -- build -------------------------------------------------------------------------
    def build(self) -> None:
        self.ch.progress("build", 0, 1, "importing and compiling the candidate")
        bdir = self.bdir
        started = time.monotonic()
        try:
            self.cand_module = load_source("cudal1_candidate", self.job.candidate_source,
                                           self.h.workdir)
        except BaseException as exc:
            self._compile_failed(exc)
        cls = getattr(self.cand_module, "ModelNew", None)
        if not isinstance(cls, type):
            self.rep.fail("compile", "the candidate defines no class ModelNew")
            raise _Stop
        try:
            self.candidate = self.h.construct(cls)
            self.fn.load_matching_state(self.reference, self.candidate)
            self.candidate = self.candidate.to(self.h.device)
        except BaseException as exc:
            if self.fn.looks_like_build_error(str(exc)):
                self._compile_failed(exc)
            if _blocked(exc):
                raise
            self.rep.fail("runtime", f"ModelNew(...) failed: {self.fn.describe_exception(exc)}")
            raise _Stop from None
        self.rep.compile_time_s = round(time.monotonic() - started, 3)
        self.rep.build_cached = bdir.cached
        bdir.mark_complete()
        self.ch.progress("build", 1, 1, f"built in {self.rep.compile_time_s:.1f} s")

    def _compile_failed(self, exc: BaseException) -> None:
        if _blocked(exc):
            raise exc
        message = self.fn.describe_exception(exc, limit=200_000)
        if self.build_path:
            message = message.replace(self.build_path, "<build>")
        self.rep.compile_log = log = self.fn.trim_compile_log(message)
        self.rep.fail("compile", self.fn.headline(log) or type(exc).__name__)
        raise _Stop from None

    def lock_down(self) -> None:
        fn = self.fn
        self.rep.flags += fn.diff_globals(self.globals0, fn.snapshot_globals())
        self.rep.flags += fn.check_namespace(vars(self.h.problem), vars(self.cand_module))
        self.rep.flags += self.guard_findings()
        self.settings_cand = fn.snapshot_settings()
        self.rep.settings_changed = fn.diff_settings(self.settings0, self.settings_cand)
        fn.restore_settings(self.settings0)
        self._guard_lock()
        restore, s0, sc = fn.restore_settings, self.settings0, self.settings_cand
        # the reference always runs under the original settings, the candidate under its own
        self.prepare = {"reference": lambda: restore(s0), "candidate": lambda: restore(sc)}
        self.calls = {"reference": self.h.caller(self.reference),
                      "candidate": self.h.caller(self.candidate)}

    def guard_findings(self) -> list[Flag]:
        return self._guard_findings() if self.guard is not None else []

    def ref_call(self, args: list[Any]) -> Any:
        self.prepare["reference"]()
        return self.calls["reference"](args)

    def cand_call(self, args: list[Any]) -> Any:
        self.prepare["candidate"]()
        return self.calls["candidate"](args)

    # -- correctness -------------------------------------------------------------------
    def correctness(self) -> None:
        trials, expected_prev = self.job.correctness_trials, None
        for t in range(trials):
            self.ch.progress("correctness", t, trials, "")
            report, expected_prev = self._trial(t, expected_prev)
            self.rep.trials.append(report)
            if not report.ok:
                break
        self.ch.progress("correctness", trials, trials, "")
        after = self.fn.diff_settings(self.settings0, self._settings_after_candidate)
        self.rep.settings_changed.update(after)
        if not all(t.ok for t in self.rep.trials) or _rejected(self.rep.flags):
            raise _Stop

    def _trial(self, t: int, previous: Any) -> tuple[TrialReport, Any]:
        fn, dev, sync = self.fn, self.h.device, self.h.clock.sync
        inputs = self.h.make_inputs()
        ref_in, c1_in, c2_in = (fn.clone_inputs(inputs), fn.clone_inputs(inputs),
                                fn.clone_inputs(inputs))
        fn.poison(dev, previous)
        first = self.cand_call(c1_in)
        sync()
        expected = self.ref_call(ref_in)  # stays alive while the candidate runs again
        sync()
        fn.poison(dev, expected)
        second = self.cand_call(c2_in)
        sync()
        self._settings_after_candidate = fn.snapshot_settings()
        for out in (first, second):
            self.rep.flags += fn.check_outputs(out, expected)
        if not (fn.same_inputs(c1_in, ref_in) and fn.same_inputs(c2_in, ref_in)):
            self.rep.flags.append(Flag("input_mutation", "the candidate modified its inputs in "
                                       "place (the reference leaves them as they were)"))
        r1 = fn.compare_outputs(expected, first, self.job.tolerance)
        r2 = fn.compare_outputs(expected, second, self.job.tolerance)
        message = r1.message or (r2.message and f"second call, after the reference: {r2.message}")
        return TrialReport(t, r1.ok and r2.ok, max(r1.max_abs_err, r2.max_abs_err),
                           max(r1.max_rel_err, r2.max_rel_err), message), expected

    # -- timing ------------------------------------------------------------------------
    def timing(self) -> None:
        recheck, tol, compare = self.rep.recheck, self.job.tolerance, self.fn.compare_outputs

        def on_round(outputs: dict[str, Any], _inputs: list[Any]) -> None:
            recheck.compared += 1
            result = compare(outputs["reference"], outputs["candidate"], tol)
            if not result.ok:
                recheck.mismatches += 1
                recheck.detail = recheck.detail or f"timed call {recheck.compared}: " \
                    f"{result.message}"

        late: dict[str, int] = {}
        samples = self.fn.interleaved(
            self.h.clock, self.calls, self.h.make_inputs, plan_of(self.job), on_round=on_round,
            progress=lambda n, total: self.ch.progress("timing", n, total, ""),
            prepare=self.prepare, late=late,
        )
        self.rep.timing = {k: RawTiming(v, self.h.clock.name, late.get(k, 0))
                           for k, v in samples.items()}

    # -- profile -----------------------------------------------------------------------
    def profile(self) -> None:
        if not (self.h.clock.is_cuda and self.job.profile):
            return
        self.ch.progress("profile", 0, 1, "")
        inputs = self.h.make_inputs()
        sync = self.h.clock.sync
        self.prepare["reference"]()
        ref = self.fn.kernels_of(self.calls["reference"], inputs, sync)
        self.prepare["candidate"]()
        cand = self.fn.kernels_of(self.calls["candidate"], inputs, sync)
        self.rep.profile, flags = self.fn.profile_summary(ref, cand, self.job.candidate_source)
        self.rep.flags += flags

    # -- wrap-up (every path) ------------------------------------------------------------
    def failed(self, exc: BaseException) -> None:
        """The candidate raised: a refusal by the guard is a verdict, anything else a crash."""
        if _blocked(exc):
            reasons = [f"{f.code}: {f.reason}" for f in self.guard_findings()
                       if f.severity == "reject"]
            self.rep.fail("blocked", "; ".join(dict.fromkeys(reasons)) or _describe(exc))
        else:
            self.rep.fail("runtime", _describe(exc))

    def wrap_up(self) -> None:
        """Settings back, and the guard's findings into the report, whatever happened."""
        if self.guard is None:
            return
        try:
            self.fn.restore_settings(self.settings0)
            self.rep.flags += self._guard_findings()
        except BaseException as exc:
            self.rep.fail("runtime", _describe(exc))


def _describe(exc: BaseException) -> str:
    from evaluator.harness import describe_exception  # bound copy unavailable before setup

    return describe_exception(exc)


def _blocked(exc: BaseException | None) -> bool:
    """The guard's PermissionError, raised here or anywhere in the exception's chain."""
    seen = 0
    while exc is not None and seen < 20:
        if isinstance(exc, PermissionError) and BLOCKED in str(exc):
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


def _rejected(flags: list[Flag]) -> bool:
    return any(f.severity == "reject" for f in flags)


def run(job: Job, channel: WorkerChannel, *, profile_only: bool = False) -> WorkerReport:
    """The whole evaluation; with ``profile_only``, the profiler pass alone (for a child whose
    profiler started while it waited: see ``evaluator.launch``)."""
    report = WorkerReport()
    started = time.monotonic()
    worker = Worker(job, channel, report)
    try:
        worker.phase("setup", worker.setup)
        worker.phase("build", worker.build)
        worker.phase("lock_down", worker.lock_down)
        with worker.h.no_grad():
            if not profile_only:
                worker.phase("correctness", worker.correctness)
                worker.phase("timing", worker.timing)
            worker.phase("profile", worker.profile)
        report.phase = "done"
    except _Stop:
        pass
    except BaseException as exc:  # anything the candidate throws ends as a report
        worker.failed(exc)
    worker.wrap_up()
    report.add_flags([])  # one of each finding
    report.busy_s = round(time.monotonic() - started, 3)
    return report
