"""The parent's verdict (stdlib only), from what trusted processes measured.

Correctness comes from the referee's checks (``conduct.Evidence``), never from the runner's
report; every time is the parent's own clock around a trusted window (``timing_checks``). The
candidate's report adds only what can make its verdict worse (errors, guard findings) or is
informative (compile log, profile).
"""

from __future__ import annotations

import math
from dataclasses import replace

from cudal1_evaluator.isolation.sandbox import Outcome
from cudal1_evaluator.parent import diskcap, reference_runner, thread_budget
from cudal1_evaluator.parent.conduct import Evidence
from cudal1_evaluator.parent.timing_checks import (
    HANDOFF_MOST,
    SLOWED_CAP,
    Burst,
    at_floor,
    means,
    median_of,
    ratio,
    reference_means,
    reference_slowed,
)
from cudal1_evaluator.plain_text import shown
from cudal1_evaluator.reward import RewardPolicy, noise_band, score, severity_under
from cudal1_evaluator.schema import (
    SEVERITIES,
    SPEEDUP_BOUND_WORDS,
    Flag,
    Job,
    Result,
    Status,
    TimingSummary,
)
from cudal1_evaluator.stats import summarize
from cudal1_evaluator.verdict_details import DeviceInfo, ToleranceInfo
from cudal1_evaluator.wire.report import WorkerReport

_SIGNALS = {
    "SIGSEGV": "segmentation fault",
    "SIGABRT": "aborted",
    "SIGBUS": "bus error",
    "SIGILL": "illegal instruction",
    "SIGFPE": "floating-point exception",
    "SIGKILL": "killed (out of memory, or a resource limit)",
    "SIGXCPU": "CPU time limit exceeded",
    "SIGXFSZ": "file size limit exceeded",
}


def stderr_lines(text: str, n: int = 15) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return "\n".join(lines[-n:])


def with_stderr(head: str, stderr_tail: str, n: int = 15) -> str:
    """``head``, then the last ``n`` lines the process wrote to stderr, if it wrote any."""
    tail = stderr_lines(stderr_tail, n)
    return f"{head}\nlast stderr lines:\n{tail}" if tail else head


def crash_message(outcome: Outcome, memory_mb: int | None) -> str:
    if outcome.disk_exceeded:
        head = diskcap.message(outcome.disk_exceeded)
    elif outcome.memory_exceeded:
        head = f"out of memory: the process passed the memory limit ({memory_mb} MB) and was killed"
    elif outcome.signal_name:
        what = _SIGNALS.get(outcome.signal_name, "killed by a signal")
        head = f"the evaluation process died: {what} ({outcome.signal_name})"
    else:
        head = f"the evaluation process exited with code {outcome.returncode} without a verdict"
    return with_stderr(head, outcome.stderr_tail)


def _process_failure(job: Job, outcome: Outcome) -> tuple[Status, str] | None:
    if outcome.cancelled:
        return "timeout", "cancelled"
    if outcome.timed_out:
        stage = outcome.last_stage or "startup"
        # with where a hang was, when it said anything
        return "timeout", with_stderr(f"timed out after {job.timeout_s:g} s (during {stage})",
                                      outcome.stderr_tail)
    return None



CLOCK = "trusted_window"  # the parent's clock around each window, per call


def _timing(ev: Evidence) -> dict[str, TimingSummary]:
    sides = {"reference": ev.reference, "candidate": ev.candidate,
             "reference_pristine": ev.alone, "reference_matched": ev.matched,
             "reference_one_thread": ev.one_thread, "reference_alone_sized": ev.alone_sized}
    return {name: replace(summarize(means(bursts), CLOCK), at_floor=_mostly_at_floor(bursts))
            for name, bursts in sides.items() if bursts or name in ("reference", "candidate")}


def _mostly_at_floor(bursts: list[Burst]) -> bool:
    floored, windows = at_floor(bursts)
    return windows > 0 and 2 * floored >= windows


def _timing_flags(timing: dict[str, TimingSummary]) -> list[Flag]:
    flags = []
    for name in ("reference", "candidate"):
        if timing[name].n == 0 or timing[name].median_ms <= 0:
            flags.append(Flag("timing_implausible", f"no usable {name} timing samples"))
    alone = _cap_name(timing)
    if alone is not None:
        slowed = reference_slowed(timing["reference"], timing[alone])
        if slowed is not None:
            flags.append(slowed)
    return flags


def _floor_flag(ev: Evidence) -> list[Flag]:
    """``per_call_upper_bound`` (info) where most of a side's windows read their floor
    (``Burst.at_floor``): their time a call then keeps the fixed costs the credits could not
    take off, on a side whose calls are short against the per-call release, so the speedup
    reads closer to 1x than the device times do. Said so that a user does not read it as
    the kernel's own."""
    if not (_mostly_at_floor(ev.candidate) or _mostly_at_floor(ev.reference)):
        return []
    counts = {"candidate": at_floor(ev.candidate), "reference": at_floor(ev.reference)}
    said = "; ".join(f"the {side}'s {k} of {n}" for side, (k, n) in counts.items() if n)
    return [Flag("per_call_upper_bound", f"windows whose fixed costs reached {HANDOFF_MOST:.0%} "
                 f"of their wall time ({said}) count that share as their calls' time: an "
                 "upper bound that keeps each call's hand-over and release in it, so a fast "
                 "side reads slower than its device time and the speedup closer to 1x "
                 "(docs/security.md, Known limits, \"Per-call release costs each call a round "
                 "trip\")", "info")]


def _cap_name(timing: dict[str, TimingSummary]) -> str | None:
    """Which alone timing the cap on a slowed reference holds to (``Evidence.alone_for_cap``)."""
    found = [n for n in ("reference_pristine", "reference_alone_sized") if n in timing]
    return min(found, key=lambda n: timing[n].median_ms) if found else None


def _against_alone(ev: Evidence) -> bool:
    alone, inter = median_of(ev.alone_for_cap()), median_of(ev.reference)
    return alone is not None and inter is not None and inter > SLOWED_CAP * alone


def _speedups(ev: Evidence, result: Result) -> None:
    """Headline: the lowest against any reference timed: the baseline, the one under the
    candidate's precision, the one on one thread (a precision claim or a thread count never
    inflates it); the baseline's beside it. The baseline reference is the one interleaved
    with it, capped at 5 % over the reference alone."""
    cand = means(ev.candidate)
    strict = ratio(reference_means(ev.alone_for_cap(), ev.reference), cand)
    if not (ev.matched or ev.one_thread):
        result.speedup, result.speedup_strict = strict, None
        return
    found = [r for r in (ratio(means(b), cand) for b in (ev.matched, ev.one_thread) if b) if r]
    result.speedup_strict = strict
    result.speedup = min([*found, strict] if strict else found) if found else strict


def _one_thread_flag(ev: Evidence, result: Result) -> list[Flag]:
    if not ev.one_thread:
        return []
    one = ratio(means(ev.one_thread), means(ev.candidate))
    lowest = bool(one and result.speedup_strict and one < result.speedup_strict)
    reason = thread_budget.flag_reason(thread_budget.reference_threads(ev.info), lowest)
    return [Flag(thread_budget.NAME + "_reference", reason, "warn" if lowest else "info")]


def _status(report: WorkerReport | None, ev: Evidence, flags: list[Flag]) -> tuple[Status, bool]:
    if report is not None and report.error_kind == "compile":
        return "compile_error", False
    if report is not None and report.error_kind == "blocked":
        return "rejected", False
    if any(f.code == "shared_file_cut" for f in flags):  # the referee died of it
        return "rejected", False
    if (report is not None and report.error_kind) or ev.referee_error:
        return "runtime_error", False
    correct = bool(ev.trials) and all(t.ok for t in ev.trials) and ev.recheck.mismatches == 0
    if not correct:
        return ("incorrect", False) if ev.trials else ("runtime_error", False)
    if any(f.severity == "reject" for f in flags):
        return "rejected", True
    if not ev.timed or ev.protocol_error:
        return "runtime_error", True
    return "ok", True


def _ok_message(result: Result, alone: bool) -> str:
    ref = result.timing[(_cap_name(result.timing) or "reference") if alone else "reference"]
    cand = result.timing["candidate"]
    used = f"alone {ref.median_ms:.4g} ms +5 %" if alone else f"{ref.median_ms:.4g} ms"
    bound = SPEEDUP_BOUND_WORDS.get(result.speedup_bound, "")
    text = f"speedup {bound}{result.speedup:.3g}x (reference {used}, candidate " \
           f"{cand.median_ms:.4g} ms)"
    if result.speedup_strict is not None:
        text += (f"; against the strict fp32 reference {result.speedup_strict:.3g}x "
                 f"(the candidate computes in {result.precision.get('candidate')})")
    if result.precision.get("baseline"):
        text += f"; baseline: {result.precision['baseline']}"
    if any(f.code in ("fallback_taken", "optional_build_failed") for f in result.flags):
        text += "; its own kernel or build did not run: the fallback ran and was timed"
    return text + _fast_kernel_note(result)


LAUNCH_BOUND_MS = 0.05  # a call whose GPU time is below this is a microsecond kernel
RELEASE_BOUND = 1.25  # a trusted call this many times its GPU time is mostly the release


def _fast_kernel_note(result: Result) -> str:
    """Fast kernels: the headline is the trusted wall time per call (what a caller that waits
    for each result pays, the launch and, on a GPU, the per-call release's context switches
    included); the GPU time per call, from the profiler in the candidate's own process, is
    shown beside it and never enters a speedup. Below ``LAUNCH_BOUND_MS`` the call is
    launch-bound; above it, a trusted call well over its GPU time is mostly the release
    (security.md, Known limits, "Per-call release costs each call a round trip")."""
    cand_us = result.profile.get("candidate_gpu_us") if result.profile else None
    ref_us = result.profile.get("reference_gpu_us") if result.profile else None
    wall = result.timing.get("candidate")
    if not cand_us or wall is None:
        return ""
    gpu_ms = cand_us / 1e3
    ref = f", reference {ref_us / 1e3:.3g} ms" if ref_us else ""
    shown = (f"GPU time {gpu_ms:.3g} ms a call{ref} (the candidate process's profiler, "
             "informational); the headline is the wall time per call")
    if gpu_ms < LAUNCH_BOUND_MS:
        return (f"; launch-bound: {shown} in a loop ({wall.median_ms:.3g} ms), launch "
                "included, as a caller's loop pays it")
    if wall.median_ms < RELEASE_BOUND * gpu_ms:
        return ""
    return (f"; a fast kernel: {shown} ({wall.median_ms:.3g} ms), each call released on its "
            "own (no call sees the next one's inputs): both sides pay a launch and two GPU "
            "context switches a call, so the speedup reads closer to 1 than the GPU times do")


def _rejected_message(result: Result, reasons: str) -> str:
    """``1.87x, rejected: <reasons>`` when the candidate ran correctly and was timed: the
    measured speedup is shown whatever the verdict (issue 22)."""
    if result.correct and result.speedup is not None and math.isfinite(result.speedup):
        return f"{result.speedup:.3g}x, rejected: {reasons}"
    return reasons


def _under_policy(flags: list[Flag], policy: RewardPolicy) -> list[Flag]:
    """The reward policy decides the severity of the flags it governs (static outputs, a
    fallback that ran): "zero" rejects, "full" warns."""
    out = []
    for flag in flags:
        severity = severity_under(policy, flag.code)
        if severity is not None and severity != flag.severity:
            rejects = severity == "reject"
            flag = Flag(flag.code, f"{flag.reason} [reward policy: {severity}]",
                        "reject" if rejects else "warn")
        out.append(flag)
    return out


def _runtime_message(report: WorkerReport | None, ev: Evidence, outcome: Outcome) -> str:
    error = report.error if report is not None else ""
    if ev.referee_error and not error:
        if ev.referee_failed_after_candidate:  # GPU memory, for one, is not contained
            return ("the trusted side failed after the candidate's code had run (the "
                    f"candidate may be the cause, e.g. device memory it holds): "
                    f"{ev.referee_error}")
        return f"the reference failed (not the candidate): {ev.referee_error}"
    if report is None:
        crash = crash_message(outcome, None)
        return f"{crash}\n(protocol: {ev.protocol_error})" if ev.protocol_error else crash
    text = error or ev.protocol_error or "the evaluation stopped before it finished"
    return with_stderr(text, outcome.stderr_tail, 8) if report.error_kind else text


def _message(status: Status, report: WorkerReport | None, ev: Evidence, outcome: Outcome,
             result: Result) -> str:
    if status == "ok":
        return _ok_message(result, _against_alone(ev))
    if status == "compile_error":
        return report.error if report is not None else ""
    if status == "runtime_error":
        return _runtime_message(report, ev, outcome)
    if status == "incorrect":
        bad = next((t for t in ev.trials if not t.ok), None)
        if bad is not None:
            return f"trial {bad.trial}: {bad.message}"
        return ev.recheck.detail or "incorrect output"
    reasons = [f"{f.code}: {f.reason}" for f in result.flags if f.severity == "reject"]
    text = "; ".join(dict.fromkeys(reasons)) or (report.error if report is not None else "")
    blocked = report is not None and report.error_kind == "blocked"
    return (f"blocked by the evaluator: {text}" if blocked
            else _rejected_message(result, text))[:2000]


def _flags_of(outcome: Outcome, report: WorkerReport | None, ev: Evidence) -> list[Flag]:
    flags = (list(report.flags) if report is not None else []) + list(ev.flags)
    if outcome.channel_problem:
        flags.append(Flag("verdict_channel_tampered", outcome.channel_problem))
    if report is None and not outcome.timed_out and not outcome.cancelled:
        flags.append(Flag("no_worker_report", "the candidate's process ended without its report "
                          "(a forged or cut-off report earns nothing)"))
    if ev.recheck.mismatches:
        flags.append(Flag("timed_output_mismatch", f"{ev.recheck.mismatches} of "
                          f"{ev.recheck.compared} timed outputs checked (against the reference "
                          f"on the same inputs) failed: {ev.recheck.detail}"))
    return flags


def _precision_flag(ev: Evidence, tolerance: ToleranceInfo) -> list[Flag]:
    """A candidate computing below the baseline's precision: said, with the tolerance it
    passed and the reference it is compared with."""
    p = ev.precision
    if not ev.matched or p.get("candidate", "fp32") == "fp32":  # e.g. cudnn.benchmark alone
        return []
    observed = ", ".join(p.get("observed") or []) or "none"
    settings = ", ".join(sorted(p.get("settings") or {})) or "none"
    fp32 = (tolerance.get("by_dtype") or {}).get("float32")
    tol = f"{tolerance.get('preset', '?')} (fp32 {fp32['atol']:g})" if fp32 else \
        str(tolerance.get("preset", "?"))
    return [Flag("precision_lowered", f"the candidate computes in {p.get('candidate')} (settings "
                 f"changed: {settings}; reduced dtypes seen: {observed}): its speedup is the "
                 f"lower of the reference at that precision ({p.get('reference')}) and the "
                 f"baseline; it passed the {tol} tolerance against the strict fp32 reference",
                 "warn")]


def _from_evidence(job: Job, outcome: Outcome, report: WorkerReport | None, ev: Evidence,
                   result: Result) -> None:
    info = ev.info
    result.trials = ev.trials
    result.tolerance = (info.get("tolerance") or ToleranceInfo()).copy()
    result.device = (info.get("device") or DeviceInfo()).copy()
    result.versions = dict(info.get("versions") or {})
    result.settings_changed = ev.settings_changed
    result.precision = ev.precision.copy()
    result.precision.pop("autocast", None)
    result.precision["baseline"] = reference_runner.baseline_name(job)
    if report is not None:
        result.profile = report.profile
        result.compile_time_s, result.build_cached = report.compile_time_s, report.build_cached
    output = stderr_lines(outcome.stdout_tail + "\n" + outcome.stderr_tail, 40)
    result.compile_log = (report.compile_log if report is not None else "") or output[-4000:]
    flags = _flags_of(outcome, report, ev) + _precision_flag(ev, result.tolerance)
    if ev.timed:
        result.timing = _timing(ev)
        flags += _timing_flags(result.timing) + _floor_flag(ev)
    result.flags = _under_policy(_one_each(flags), _policy(job))
    result.status, result.correct = _status(report, ev, result.flags)
    if ev.timed:  # every timed candidate keeps its measured speedup, rejected ones too
        _speedups(ev, result)
        result.flags += _one_thread_flag(ev, result)
    result.message = _message(result.status, report, ev, outcome, result)


def _policy(job: Job) -> RewardPolicy:
    try:
        return RewardPolicy.parse(job.reward.policy)
    except ValueError:  # check_job refused it before any evaluation; the defaults otherwise
        return RewardPolicy()


def _one_each(flags: list[Flag]) -> list[Flag]:
    seen: dict[tuple[str, str], Flag] = {}
    for flag in flags:
        seen.setdefault((flag.code, flag.reason), flag)
    return list(seen.values())


def decide(job: Job, outcome: Outcome, report: WorkerReport | None,
           evidence: Evidence | None = None) -> Result:
    result = Result(status="runtime_error", job_id=job.job_id)
    failure = _process_failure(job, outcome)
    if failure is not None:
        result.status, result.message = failure
    elif evidence is None:
        result.message = crash_message(outcome, job.memory_limit_mb)
    else:
        _from_evidence(job, outcome, report, evidence, result)
    ref, cand = result.timing.get("reference"), result.timing.get("candidate")
    noise = noise_band(ref.samples_ms, cand.samples_ms) if ref and cand else 0.0
    rewarded = score(job.reward.name, job.reward.params, result.status, result.speedup,
                     noise=noise)
    if rewarded.within_noise:
        result.flags.append(Flag("speedup_within_noise", f"{result.speedup:.3g}x is within the "
                                 f"timing noise (±{noise:.1%}): scored as 1x", "info"))
    result.reward = rewarded.reward if math.isfinite(rewarded.reward) else 0.0
    result.reward_formula, result.reward_params = rewarded.formula, rewarded.params
    result.reward_policy = _policy(job).as_dict()
    _made_safe_to_show(result)
    return result


def _made_safe_to_show(result: Result) -> None:
    """The verdict's text as it will be shown: the candidate wrote parts of it."""
    result.message = shown(result.message)
    result.compile_log = shown(result.compile_log)
    result.flags = [replace(f, code=shown(f.code), reason=shown(f.reason),
                            severity=f.severity if f.severity in SEVERITIES else "reject")
                    for f in result.flags]


def slowed_now(ev: Evidence) -> bool:
    """Would the timing so far flag ``reference_slowed``? (for a fresh alone measurement)"""
    if not ev.alone or not ev.reference:
        return False
    inter = summarize(means(ev.reference), "")
    return reference_slowed(inter, summarize(means(ev.alone_for_cap()), "")) is not None
