"""The seam to the evaluator: gate, build and evaluation of a candidate, and the problem probe.

Candidate and problem code run only in evaluator subprocesses, never here.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from cudal1_evaluator import launch
from cudal1_evaluator.reward import score
from cudal1_evaluator.schema import BuildOutcome, Job, ProbeJob, ProbeResult, Result, Status
from cudal1_tui.analysis.gate import Finding, check_candidate
from cudal1_tui.evaluation import evaluate_job, gate_result

Progress = Callable[[str, int, int, str], None]

# A build outcome that is already the verdict: evaluating would repeat the same build
# under the same time limit, while holding the device.
FINAL_BUILD_STATUSES = frozenset({"compile_error", "timeout"})


def needs_build(code: str) -> bool:
    """Whether importing the candidate compiles an extension (a cheap textual check)."""
    return "load_inline" in code or "cpp_extension" in code


@dataclass
class Prepared:
    """What the build stage learned: the gate's findings, and a verdict if one is already
    known (the gate rejected the candidate, or its build failed)."""

    findings: list[Finding] = field(default_factory=list)
    verdict: Result | None = None
    build: BuildOutcome | None = None


def gate(job: Job) -> Prepared:
    """The static gate: a ``reject`` finding is the candidate's verdict."""
    findings = check_candidate(job.candidate_source, job.problem_source)
    return Prepared(findings, gate_result(job, findings))


def build(job: Job, prepared: Prepared, cancel: threading.Event) -> Prepared:
    """Compile the candidate into the keyed build cache (a sandboxed subprocess)."""
    outcome = launch.build(job, cancel=cancel)
    prepared.build = outcome
    if outcome.status in FINAL_BUILD_STATUSES:
        prepared.verdict = build_verdict(job, outcome, prepared.findings)
    return prepared


def build_verdict(job: Job, outcome: BuildOutcome, findings: list[Finding]) -> Result:
    """The Result of a candidate whose build failed, scored like any evaluation."""
    status: Status = "timeout" if outcome.status == "timeout" else "compile_error"
    scored = score(job.reward.name, job.reward.params, status, None)
    message = outcome.message or ("the build did not finish in time" if status == "timeout"
                                  else "the candidate does not compile")
    return Result(status=status, message=message, compile_log=outcome.compile_log,
                  compile_time_s=outcome.compile_time_s, build_cached=outcome.cached,
                  flags=[f.to_flag() for f in findings], reward=scored.reward,
                  reward_formula=scored.formula, reward_params=scored.params,
                  job_id=job.job_id, wall_time_s=outcome.compile_time_s)


def evaluate(job: Job, findings: list[Finding], on_progress: Progress | None,
             cancel: threading.Event) -> Result:
    """The evaluator on a candidate that passed the gate; the gate's warnings lead its flags."""
    result = evaluate_job(job, gate=False, on_progress=on_progress, cancel=cancel)
    result.flags = [f.to_flag() for f in findings] + result.flags
    return result


def probe(job: ProbeJob) -> ProbeResult:
    return launch.probe(job)
