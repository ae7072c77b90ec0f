"""The parent's verdict, recomputed from raw data (stdlib only).

Nothing the worker claims is taken at face value: the status follows from the
trials, the recheck and the flags; the timing summaries and the speedup are
recomputed from raw samples; the samples must fit in the worker's own wall time;
the in-process reference is checked against the pristine one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from evaluator import diskcap
from evaluator.report import WorkerReport
from evaluator.reward import noise_band, score
from evaluator.sandbox import Outcome
from evaluator.schema import Flag, Job, Result, Status, TimingSummary
from evaluator.stats import summarize

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
SLOWED_MIN = 0.15  # the in-process reference may be this much slower than the pristine one


def stderr_lines(text: str, n: int = 15) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return "\n".join(lines[-n:])


def crash_message(outcome: Outcome, memory_mb: int | None) -> str:
    if outcome.extra.get(diskcap.EXTRA_KEY):
        head = diskcap.message(int(outcome.extra[diskcap.EXTRA_KEY]))
    elif outcome.memory_exceeded:
        head = f"out of memory: the process passed the memory limit ({memory_mb} MB) and was killed"
    elif outcome.signal_name:
        what = _SIGNALS.get(outcome.signal_name, "killed by a signal")
        head = f"the evaluation process died: {what} ({outcome.signal_name})"
    else:
        head = f"the evaluation process exited with code {outcome.returncode} without a verdict"
    tail = stderr_lines(outcome.stderr_tail)
    return f"{head}\nlast stderr lines:\n{tail}" if tail else head


def _process_failure(job: Job, outcome: Outcome) -> tuple[Status, str] | None:
    if outcome.cancelled:
        return "timeout", "cancelled"
    if outcome.timed_out:
        stage = outcome.last_stage or "startup"
        return "timeout", f"timed out after {job.timeout_s:g} s (during {stage})"
    return None


def _summaries(report: WorkerReport) -> dict[str, TimingSummary]:
    return {k: summarize(v.samples_ms, v.clock) for k, v in report.timing.items()}


def _timing_flags(report: WorkerReport, timing: Mapping[str, TimingSummary]) -> list[Flag]:
    flags: list[Flag] = []
    total_s = sum(sum(t.samples_ms) for t in timing.values()) / 1000
    if report.busy_s > 0 and total_s > report.busy_s * 1.05 + 0.5:
        flags.append(Flag("timing_implausible", f"timed samples add up to {total_s:.2f} s, more "
                          f"than the worker's whole run ({report.busy_s:.2f} s)"))
    raw = report.timing.get("candidate")
    if raw is not None and raw.late > max(2, len(raw.samples_ms) // 4):
        flags.append(Flag("work_outside_timed_stream", f"{raw.late} of {len(raw.samples_ms)} "
                          "timed candidate calls left GPU work running past the timing stream "
                          "(side streams?); it was counted through a device-wide sync", "warn"))
    for name in ("reference", "candidate"):
        summary = timing.get(name)
        if summary is None or summary.n == 0 or summary.median_ms <= 0:
            flags.append(Flag("timing_implausible", f"no usable {name} timing samples"))
    return flags


def reference_slowed(inproc: TimingSummary, pristine: TimingSummary) -> Flag | None:
    """Patched torch ops or timers show up as a reference slower than its pristine twin."""
    if inproc.n == 0 or pristine.n == 0 or pristine.median_ms <= 0:
        return None
    allowed = max(SLOWED_MIN, 3 * max(inproc.spread, pristine.spread))
    ratio = inproc.median_ms / pristine.median_ms
    if ratio <= 1 + allowed:
        return None
    return Flag("reference_slowed", f"the reference ran {ratio:.2f}x slower next to the "
                f"candidate ({inproc.median_ms:.4g} ms) than in a clean process "
                f"({pristine.median_ms:.4g} ms; allowed +{allowed:.0%}): patched torch ops, "
                f"timers or background load from the candidate")


def _status(report: WorkerReport, flags: list[Flag]) -> tuple[Status, bool]:
    if report.error_kind == "compile":
        return "compile_error", False
    if report.error_kind == "blocked":  # the guard refused a call: a verdict, not a crash
        return "rejected", False
    if report.error_kind:
        return "runtime_error", False
    correct = bool(report.trials) and all(t.ok for t in report.trials)
    correct = correct and report.recheck.mismatches == 0
    if not correct:
        return "incorrect", False
    if any(f.severity == "reject" for f in flags):
        return "rejected", True
    if report.phase != "done":
        return "runtime_error", True
    return "ok", True


def _message(status: Status, report: WorkerReport, outcome: Outcome, result: Result) -> str:
    if status == "ok":
        ref, cand = result.timing["reference"], result.timing["candidate"]
        return (f"speedup {result.speedup:.3g}x (reference {ref.median_ms:.4g} ms, "
                f"candidate {cand.median_ms:.4g} ms)")
    if status == "compile_error":
        return report.error
    if status == "runtime_error":
        tail = stderr_lines(outcome.stderr_tail, 8)
        text = report.error or "the evaluation stopped before it finished"
        return f"{text}\nlast stderr lines:\n{tail}" if tail and report.error_kind else text
    if status == "incorrect":
        bad = next((t for t in report.trials if not t.ok), None)
        if bad is not None:
            return f"trial {bad.trial}: {bad.message}"
        return report.recheck.detail or "incorrect output"
    reasons = [f"{f.code}: {f.reason}" for f in result.flags if f.severity == "reject"]
    text = "; ".join(dict.fromkeys(reasons)) or report.error
    return (f"blocked by the evaluator: {text}" if report.error_kind == "blocked" else text)[:2000]


def _from_report(job: Job, outcome: Outcome, report: WorkerReport,
                 pristine: WorkerReport | None, result: Result) -> None:
    result.trials, result.tolerance = report.trials, report.tolerance
    result.settings_changed, result.profile = report.settings_changed, report.profile
    result.device, result.versions = report.device, report.versions
    result.compile_time_s, result.build_cached = report.compile_time_s, report.build_cached
    output = stderr_lines(outcome.stdout_tail + "\n" + outcome.stderr_tail, 40)
    result.compile_log = report.compile_log or output[-4000:]
    flags = list(report.flags)
    if outcome.channel_problem:
        flags.append(Flag("verdict_channel_tampered", outcome.channel_problem))
    if report.recheck.mismatches:
        flags.append(Flag("timed_output_mismatch", f"{report.recheck.mismatches} of "
                          f"{report.recheck.compared} timed outputs differ from the reference "
                          f"on the same inputs: {report.recheck.detail}"))
    timing = _summaries(report)
    if pristine is not None:
        if pristine.error_kind or "reference" not in pristine.timing:
            flags.append(Flag("reference_pristine_failed", pristine.error or "no samples", "warn"))
        else:
            pt = _summaries(pristine)
            timing["reference_pristine"] = pt["reference"]
            if "torch_compile" in pt:
                timing["torch_compile"] = pt["torch_compile"]
            flags += pristine.flags
            slowed = reference_slowed(timing.get("reference", TimingSummary()), pt["reference"])
            if slowed is not None:
                flags.append(slowed)
    if report.phase == "done":
        flags += _timing_flags(report, timing)
    result.timing, result.flags = timing, flags
    status, correct = _status(report, flags)
    result.status, result.correct = status, correct
    ref, cand = timing.get("reference"), timing.get("candidate")
    if ref and cand and ref.median_ms > 0 and cand.median_ms > 0:
        result.speedup = ref.median_ms / cand.median_ms
    result.message = _message(status, report, outcome, result)


def decide(job: Job, outcome: Outcome, report: WorkerReport | None,
           pristine: WorkerReport | None = None) -> Result:
    result = Result(status="runtime_error", job_id=job.job_id)
    failure = _process_failure(job, outcome)
    if failure is not None:
        result.status, result.message = failure
    elif report is None:
        result.message = crash_message(outcome, job.memory_limit_mb)
        if outcome.channel_problem:
            result.flags.append(Flag("verdict_channel_tampered", outcome.channel_problem))
    else:
        _from_report(job, outcome, report, pristine, result)
    ref, cand = result.timing.get("reference"), result.timing.get("candidate")
    noise = noise_band(ref.samples_ms, cand.samples_ms) if ref and cand else 0.0
    rewarded = score(job.reward.name, job.reward.params, result.status, result.speedup,
                     noise=noise)
    if rewarded.within_noise:
        result.flags.append(Flag("speedup_within_noise", f"{result.speedup:.3g}x is within the "
                                 f"timing noise (±{noise:.1%}): scored as 1x", "info"))
    result.reward = rewarded.reward if math.isfinite(rewarded.reward) else 0.0
    result.reward_formula, result.reward_params = rewarded.formula, rewarded.params
    return result
