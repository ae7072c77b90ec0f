"""The evaluator's public entry points (torch-free; the app calls them in its lane
processes, ``lane.py``, and builds here).

    evaluate(job, on_progress=..., cancel=...) -> Result
    build(job, cancel=...) -> BuildOutcome      (compile only: fills the build cache)
    probe(job) -> ProbeResult
    pristine_reference(job) -> TimingSummary

Each spawns isolated children (see ``cudal1_evaluator.isolation.sandbox``); candidate misbehaviour
of any kind comes back as a Result, never as an exception.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from cudal1_evaluator import toolinfo
from cudal1_evaluator.isolation import sandbox
from cudal1_evaluator.parent import build_cache as build_cache
from cudal1_evaluator.parent import (
    conduct,
    precision,
    pristine_cache,
    reference_runner,
    thread_budget,
    verdict,
    warm,
)
from cudal1_evaluator.parent.timing_checks import Burst
from cudal1_evaluator.reward import RewardPolicy
from cudal1_evaluator.schema import (
    DEVICE_FORMS,
    BuildOutcome,
    Flag,
    Job,
    ProbeJob,
    ProbeResult,
    Result,
    TimingSummary,
    parse_device,
    parse_reward,
    parse_tolerance,
)
from cudal1_evaluator.stats import summarize
from cudal1_evaluator.wire.report import WorkerReport
from cudal1_evaluator.wire.talk import PeerGone
from cudal1_evaluator.wire.talk_messages import MatchedSettings, RefereeInfo


def check_job(job: Job) -> None:
    """Caller mistakes (not candidate ones) raise ValueError."""
    if parse_device(job.device) != job.device:
        raise ValueError(f"bad device {job.device!r}: use {', '.join(DEVICE_FORMS)}")
    parse_tolerance(job.tolerance)
    parse_reward(job.reward.name)
    RewardPolicy.parse(job.reward.policy)
    if job.baseline not in ("defaults", "strict"):
        raise ValueError(f"bad baseline {job.baseline!r}: defaults or strict")
    if job.window_cost not in ("empty", "alone_intercept"):
        raise ValueError(f"bad window_cost {job.window_cost!r}: empty or alone_intercept")
    if job.correctness_trials < 1 or job.min_samples < 1 or job.timeout_s <= 0:
        raise ValueError("correctness_trials and min_samples must be >= 1, timeout_s > 0")


def limits_for(device: str, memory_mb: int | None, timeout_s: float,
               cpu_s: int | None = None) -> sandbox.Limits:
    cpus = os.cpu_count() or 1
    return sandbox.Limits(
        memory_mb=memory_mb,
        address_space=device == "cpu",  # CUDA reserves huge address ranges: watch RSS instead
        cpu_s=cpu_s or int(max(60.0, timeout_s * cpus)),
    )


def _spawn(mode: str, text: str, job: Job, *,
           on_progress: sandbox.ProgressFn | None = None,
           cancel: threading.Event | None = None) -> sandbox.Outcome:
    limits = _limits(job)
    child = warm.take(mode, job.device, limits, text, job.build_dir)
    if child is None:
        child = sandbox.Child(mode, limits, job_text=text)
    return child.run(text, job.timeout_s, limits=limits, cancel=cancel, on_progress=on_progress)


def _limits(job: Job) -> sandbox.Limits:
    return limits_for(job.device, job.memory_limit_mb, job.timeout_s, job.cpu_time_limit_s)


def _profiles(job: Job) -> bool:
    return job.profile and job.device.startswith("cuda")


def _prewarm(job: Job) -> None:
    """Start the next worker now (torch imported, waiting), so that the next evaluation of this
    kind skips the start-up; it has seen nothing of this job. On CUDA a profile child too,
    whose profiler starts while it waits."""
    limits = _limits(job)
    warm.prepare("run", job.device, limits, job.build_dir)
    # the reference's runner builds nothing: its job names the default cache (``spawn`` takes
    # a warm child by the build dir its job names); on a host it skips the dtype watch's
    # warm-up (it never runs a correctness trial; 1.6 s of CPU beside the evaluation's own)
    warm.prepare("run", job.device, limits, reference_runner.job(job).build_dir,
                 tag="reference", watch_warm_up=job.device.startswith("cuda"))
    warm.prepare("referee", job.device, limits, job.build_dir)
    if _profiles(job):
        warm.prepare("profile", job.device, limits, job.build_dir)


EARLY_PREWARM_MIN_CORES = 8  # four children's start-up beside the timing needs spare cores


def _prewarm_early(job: Job) -> None:
    """On a GPU, the next evaluation's children start once this one's windows are done (never
    beside them, nor beside the candidate's requests, after each of which the GPU must be
    idle: their start-up work would be blamed on the candidate where the GPU watch is off): a child
    takes 5-10 s to import torch and warm up on a GPU host, about as long as the rest of an
    evaluation, so back-to-back evaluations find them ready. The windows that follow compare
    the two sides round by round, both beside the same start-up work. On a CPU the timed code
    itself would compete with it, and on a host of few cores the timing's host side would
    (on 2 cores, torch imports beside a window made a 0.3 ms reference read 0.8 or 24 ms a
    call): there they start at its beginning instead, held stopped in every window
    (``_prewarm_between_windows``)."""
    if warm.enabled and job.device.startswith("cuda") and \
            (os.cpu_count() or 1) >= EARLY_PREWARM_MIN_CORES:
        _prewarm(job)


def _prewarm_between_windows(job: Job) -> None:
    """On a CPU, the next evaluation's children start as this one begins: its conductor's
    gate stops every idle warm child while a window or a no-op yardstick is timed
    (``warm.hold_idle``), so their imports run only between windows, beside untimed steps.
    Back-to-back evaluations (a round's candidates, a test suite) then find them ready
    rather than wait 4-5 s on a 2-core host for three torch imports."""
    if warm.enabled and not job.device.startswith("cuda"):
        _prewarm(job)


def _report(outcome: sandbox.Outcome) -> WorkerReport | None:
    if outcome.payload is None or outcome.timed_out or outcome.cancelled:
        return None
    try:
        return WorkerReport.from_dict(outcome.payload)
    except (TypeError, ValueError, AttributeError) as exc:
        outcome.channel_problem = outcome.channel_problem or f"malformed worker report: {exc}"
        return None


def _with_build_dir(job: Job) -> Job:
    """The job with an absolute build dir: children run in dirs of their own, where a relative
    one would name a fresh empty dir each time (the build stage's work thrown away)."""
    chosen = Path(job.build_dir) if job.build_dir else build_cache.default_build_dir()
    absolute = str(chosen.absolute())
    return job if job.build_dir == absolute else replace(job, build_dir=absolute)


def _pristine(job: Job, on_progress: sandbox.ProgressFn | None,
              cancel: threading.Event | None) -> WorkerReport | None:
    outcome = _spawn("reference", job.to_json(), job,
                     on_progress=on_progress, cancel=cancel)
    report = _report(outcome)
    if report is None:
        report = WorkerReport(error_kind="runtime",
                                      error=verdict.crash_message(outcome, job.memory_limit_mb))
    return report


def _profile_apart(child: sandbox.Child, job: Job, report: WorkerReport,
                   on_progress: sandbox.ProgressFn | None,
                   cancel: threading.Event | None) -> None:
    """The profiler pass in a warm child whose profiler has started already (2.5 s saved);
    the timing worker never starts one, as that slows kernel launches for good. The child
    loads the candidate afresh (the build is cached) and its findings join ``report``."""
    def profile_progress(stage: str, done: int, total: int, note: str) -> None:
        if on_progress is not None and stage == "profile":
            on_progress(stage, done, total, note)

    if warm.await_ready(child, "profile"):
        outcome = child.run(job.to_json(), job.timeout_s, limits=_limits(job), cancel=cancel,
                            on_progress=profile_progress)
    else:  # taken early, it failed its start-up
        child.discard()
        outcome = _spawn("profile", job.to_json(), job, on_progress=profile_progress,
                         cancel=cancel)
    extra = _report(outcome) or WorkerReport()  # no report: it crashed or timed out
    report.add_flags(extra.flags)
    report.phases["profile"] = extra.phases.get("profile", 0.0)
    if extra.phase == "done" and not extra.error_kind:
        report.profile = extra.profile
        return
    why = extra.error or verdict.crash_message(outcome, job.memory_limit_mb)
    report.phase = "profile"
    report.fail(extra.error_kind or "runtime",
                f"in the profiler pass (a separate process, fresh inputs): {why}")


def _reuse_alone(job: Job) -> conduct.Reuse:
    def lookup(info: RefereeInfo) -> tuple[list[Burst], float] | None:
        return None if job.strict else pristine_cache.get(pristine_cache.key_of(job, info))
    return lookup


def _converse(cond: conduct.Conductor, job: Job,
              start_matched: Callable[[int | None], conduct.Running]) -> None:
    """The schedule: the referee, the reference runner and the reference alone; the
    candidate's build; its trials; the timed rounds."""
    _prewarm_between_windows(job)
    with contextlib.suppress(PeerGone):
        cond.start(_reuse_alone(job))
        key = pristine_cache.key_of(job, cond.ev.info)
        if cond.alone_age is None and cond.ev.alone and not cond.alone_shared:
            pristine_cache.put(key, cond.ev.alone)  # never windows kept beside other work
        cond.build()
        cond.correctness()
        ev = cond.ev
        if ev.trials and all(t.ok for t in ev.trials) and \
                not any(f.severity == "reject" for f in ev.flags):
            if precision.matched_differs(ev.precision):
                cond.add_matched(start_matched(None))
            if thread_budget.wanted(job.device, thread_budget.reference_threads(ev.info)):
                cond.add_matched(start_matched(1), thread_budget.NAME)
            cond.timing()
            cond.settle_handoff()
            if verdict.slowed_now(ev) and cond.alone_age is not None and \
                    ev.alone_for_cap() is ev.alone:  # a reused alone figure holds the cap
                _fresh_alone(cond)
        _prewarm_early(job)


def _fresh_alone(cond: conduct.Conductor) -> None:
    """A reference that looked slowed against a reused alone measurement is judged against a
    fresh one, once the candidate's runner is gone (its processes and so its GPU contexts:
    work it left queued, on the copy engines or behind a wait, cannot slow this baseline).
    Never cached: whatever else the candidate left behind would be every later evaluation's
    baseline."""
    cond.retire("candidate")
    cond.ev.flags.append(Flag("reference_pristine_remeasured", f"the reference-alone timing "
                              f"reused from {cond.alone_age or 0:.0f} s ago looked slower than "
                              "the reference next to the candidate: measured again", "info"))
    cond.time_alone()


def _explain_referee(cond: conduct.Conductor, job: Job) -> None:
    """A referee or reference runner that died says why: its exit and its last stderr lines."""
    trusted = [cond.ref] + [r for side, r in cond.runners.items() if side != "candidate"]
    for running in trusted:
        if cond.ev.referee_error and running.outcome is not None and \
                running.outcome.payload is None:
            why = verdict.crash_message(running.outcome, job.memory_limit_mb)
            cond.ev.referee_error = f"{cond.ev.referee_error}\n{why}"
            return


def _start(mode: str, job: Job, limits: sandbox.Limits, cancel: threading.Event | None,
           on_progress: sandbox.ProgressFn | None = None, tag: str = "") -> conduct.Running:
    text = job.to_json()
    running = conduct.spawn(mode, job, limits, text, tag=tag)
    conduct.wait_on(running, text, job, limits, cancel, on_progress)
    return running


def _single(job: Job, on_progress: sandbox.ProgressFn | None,
            cancel: threading.Event | None) -> Result:
    limits = _limits(job)
    # needed only after the timing: taken now (the runner then profiles nothing), ready later
    profiler = warm.take("profile", job.device, limits, job.to_json(), job.build_dir,
                         wait=False) if _profiles(job) else None
    run_job = replace(job, profile=False) if profiler is not None else job

    def start_matched(threads: int | None = None) -> conduct.Running:
        settings: MatchedSettings = {"settings": cond.ev.settings_changed,
                                     "autocast": cond.ev.precision.get("autocast"),
                                     "threads": threads}
        return _start("run", reference_runner.job(job, settings), limits, cancel)

    children: list[conduct.Running] = []
    try:
        children.append(_start("referee", job, limits, cancel))
        children.append(_start("run", reference_runner.job(job), limits, cancel,
                               tag="reference"))
        children.append(_start("run", run_job, limits, cancel, on_progress))
    except BaseException:
        for running in children:
            running.child.discard()
        raise
    referee, refrun, worker = children
    cond = conduct.Conductor(job, referee, {"reference": refrun, "candidate": worker},
                             on_progress)
    try:
        _converse(cond, job, start_matched)
    finally:
        cond.finish()
        for running in cond.children():
            if running.thread is not None:
                running.thread.join()
    _explain_referee(cond, job)
    outcome = worker.outcome or sandbox.Outcome(cancelled=True)
    report = _report(outcome)
    cancelled = cancel is not None and cancel.is_set()
    try:
        if report is not None and profiler is not None and not cancelled and cond.ev.timed:
            child, profiler = profiler, None  # Child.run consumes it
            _profile_apart(child, job, report, on_progress, cancel)
    finally:
        if profiler is not None:  # taken but not needed: the run failed or was cancelled
            profiler.discard()
    if cancelled:
        return verdict.decide(job, sandbox.Outcome(cancelled=True), None)
    result = verdict.decide(job, outcome, report, cond.ev)
    if cond.alone_age is not None:
        result.flags.append(Flag("reference_pristine_reused", f"the reference-alone timing was "
                                 f"reused from {cond.alone_age:.0f} s ago (same problem, device, "
                                 "torch and timing settings)", "info"))
    if job.compare_torch_compile and result.ok:
        _add_torch_compile(job, result, cancel)
    _add_tool_info(result, job)
    return result


def _add_torch_compile(job: Job, result: Result, cancel: threading.Event | None) -> None:
    report = _pristine(job, None, cancel)
    if report is not None and "torch_compile" in report.timing:
        raw = report.timing["torch_compile"]
        result.timing["torch_compile"] = summarize(raw.samples_ms, raw.clock)
    if report is not None:
        result.flags += report.flags


def _add_tool_info(result: Result, job: Job) -> None:
    result.versions = {**result.versions, **toolinfo.tool_versions()}
    if job.device.startswith("cuda") and result.device:
        result.device.setdefault("driver", toolinfo.driver_version())


def strict_job(job: Job) -> Job:
    """More trials, more samples, a tighter CI, and a fresh pristine reference."""
    return replace(
        job,
        strict=True,
        correctness_trials=job.correctness_trials * 3,
        min_samples=job.min_samples * 2,
        max_samples=job.max_samples * 2,
        timing_budget_s=job.timing_budget_s * 2,
        stable_rel_ci=job.stable_rel_ci / 2,
    )


def evaluate(job: Job, *, on_progress: sandbox.ProgressFn | None = None,
             cancel: threading.Event | None = None) -> Result:
    """Compile, verify and time one candidate in isolated processes; always a Result.

    A speedup above ``job.strict_threshold`` triggers a strict re-evaluation, whose
    result (``strict_reevaluation=True``) replaces the first.
    """
    check_job(job)
    started = time.monotonic()
    job = _with_build_dir(job)
    result = _single(job, on_progress, cancel)
    speedup = result.speedup or 0.0
    if result.ok and not job.strict and speedup > job.strict_threshold:
        if on_progress is not None:
            on_progress("strict", 0, 1, f"{speedup:.1f}x > {job.strict_threshold:g}x: "
                        "strict re-evaluation")
        first = result
        result = _single(strict_job(job), on_progress, cancel)
        result.strict_reevaluation = True
        note = f"strict re-evaluation (first pass: {first.speedup:.3g}x, {first.status})"
        result.message = f"{result.message}\n{note}" if result.message else note
    result.wall_time_s = round(time.monotonic() - started, 3)
    if warm.enabled:
        _prewarm(job)
    return result


def pristine_reference(job: Job) -> TimingSummary:
    """The reference alone, timed in a process that never saw a candidate."""
    check_job(job)
    report = _pristine(_with_build_dir(job), None, None)
    if report is None or "reference" not in report.timing:
        raise RuntimeError(report.error if report else "the reference process failed")
    raw = report.timing["reference"]
    return summarize(raw.samples_ms, raw.clock)


def build(job: Job, *, cancel: threading.Event | None = None) -> BuildOutcome:
    """Compile only: import the candidate in the worker's sandbox so that its extensions build
    into ``job.build_dir``; a later ``evaluate(job)`` finds ``build_cached=True``. Nothing is
    timed and no device is opened (with ``job.cuda_arch`` set, the GPU is not asked at all)."""
    check_job(job)
    job = _with_build_dir(job)
    outcome = _spawn("build", job.to_json(), job, cancel=cancel)
    if outcome.cancelled:
        return BuildOutcome(ok=False, status="timeout", message="cancelled")
    if outcome.timed_out:
        return BuildOutcome(ok=False, status="timeout",
                            message=f"the build did not finish within {job.timeout_s:g} s")
    if outcome.payload is None:
        return BuildOutcome(ok=False, status="runtime_error",
                            message=verdict.crash_message(outcome, job.memory_limit_mb))
    try:
        built = BuildOutcome.from_dict(outcome.payload)
    except (TypeError, ValueError) as exc:
        return BuildOutcome(ok=False, status="runtime_error",
                            message=f"malformed build result: {exc}")
    if built.status not in ("ok", "compile_error", "runtime_error", "timeout"):
        return BuildOutcome(ok=False, status="runtime_error",
                            message=f"malformed build result: status {built.status!r}")
    built.ok = built.status == "ok"
    return built


def probe(job: ProbeJob) -> ProbeResult:
    """Run ``trusted.problem_probe.run_probe`` on the problem in an isolated child."""
    limits = limits_for(job.device, job.memory_limit_mb, job.timeout_s)
    outcome = sandbox.Spawn("probe", job.to_json(), job.timeout_s, limits).run()
    if outcome.timed_out:
        return ProbeResult(ok=False, error_kind="timeout",
                           message=f"the problem did not finish within {job.timeout_s:g} s")
    if outcome.payload is None:
        return ProbeResult(ok=False, error_kind="crash",
                           message=verdict.crash_message(outcome, job.memory_limit_mb))
    try:
        return ProbeResult.from_dict(outcome.payload)
    except (TypeError, ValueError) as exc:
        return ProbeResult(ok=False, error_kind="crash", message=f"malformed probe result: {exc}")


__all__ = ["build", "evaluate", "pristine_reference", "probe", "strict_job"]
