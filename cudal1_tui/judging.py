"""The one seam to the evaluator: gate, then evaluate a candidate; probe a problem.

The static gate reads the candidate here (tree-sitter, no code runs); a ``reject`` finding is
the candidate's verdict at once. Otherwise the job goes to its device's lane process
(``engine.lane_process``: ``cudal1_evaluator.launch`` there, its clock away from this
process's threads), which runs everything in isolated subprocesses (this process never
imports torch), and the gate's warnings lead the result's flags. Builds stay here: they are
not timed. The engine calls the steps one by one (gate and build on a build thread,
evaluate holding the device); the CLI and tests call ``judge``. Every Result for a candidate
that never reached an evaluation comes from ``unevaluated``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from typing import Any, Protocol

from cudal1_evaluator import launch
from cudal1_evaluator.reward import score
from cudal1_evaluator.schema import (
    BuildOutcome,
    Flag,
    Job,
    ProbeJob,
    ProbeResult,
    Result,
    RewardSpec,
    Status,
)
from cudal1_tui.analysis.gate import Finding, check_candidate, rejected
from cudal1_tui.engine import lane_process
from cudal1_tui.engine.lane_process import LaneFailed

Progress = Callable[[str, int, int, str], None]

# A build outcome that is already the verdict: evaluating would repeat the same build
# under the same time limit, while holding the device.
FINAL_BUILD_STATUSES = frozenset({"compile_error", "timeout"})

# a lane silent this long during a request (no progress, no result) is killed: the evaluator
# bounds each of its children by ``timeout_s`` and says something between them
SILENCE_FACTOR, LANE_SLACK_S = 2, 120.0

_JOB_FIELDS = frozenset(f.name for f in fields(Job)) - {"problem_source", "candidate_source"}


@dataclass
class Prepared:
    """What the steps before the evaluation learned: the gate's findings, the build's
    outcome, and a verdict if one is already known (the gate rejected the candidate, or
    its build failed)."""

    findings: list[Finding] = field(default_factory=list)
    verdict: Result | None = None
    build: BuildOutcome | None = None


class Judge(Protocol):
    """Gate then evaluate a candidate (``judge``), or the same in steps, and probe a problem."""

    def gate(self, job: Job) -> Prepared: ...

    def build(self, job: Job, prepared: Prepared, cancel: threading.Event) -> Prepared: ...

    def evaluate(self, job: Job, prepared: Prepared, *, on_progress: Progress | None = None,
                 cancel: threading.Event | None = None) -> Result: ...

    def judge(self, job: Job, *, on_progress: Progress | None = None,
              cancel: threading.Event | None = None) -> Result: ...

    def probe(self, job: ProbeJob) -> ProbeResult: ...


def unevaluated(status: Status, message: str, *, reward: RewardSpec, job_id: str = "",
                flags: Iterable[Flag] = (), outcome: BuildOutcome | None = None) -> Result:
    """The Result of a candidate whose verdict came before any evaluation (a gate reject, a
    reply without code, a cancel, a failed build), scored like any evaluation."""
    scored = score(reward.name, reward.params, status, None)
    result = Result(status=status, message=message, flags=list(flags), reward=scored.reward,
                    reward_formula=scored.formula, reward_params=scored.params, job_id=job_id)
    if outcome is not None:
        result.compile_log, result.compile_time_s = outcome.compile_log, outcome.compile_time_s
        result.build_cached, result.wall_time_s = outcome.cached, outcome.compile_time_s
    return result


def gate_verdict(job: Job, findings: list[Finding]) -> Result | None:
    """A ``rejected`` Result if the static gate's findings reject the candidate, else None."""
    bad = rejected(findings)
    if not bad:
        return None
    reasons = "; ".join(f"line {f.line}: {f.reason}" if f.line else f.reason for f in bad)
    return unevaluated("rejected", f"static gate: {reasons}", reward=job.reward,
                       job_id=job.job_id, flags=[f.to_flag() for f in findings])


def build_verdict(job: Job, outcome: BuildOutcome, findings: list[Finding]) -> Result:
    """The Result of a candidate whose build failed or ran out of time."""
    status: Status = "timeout" if outcome.status == "timeout" else "compile_error"
    message = outcome.message or ("the build did not finish in time" if status == "timeout"
                                  else "the candidate does not compile")
    return unevaluated(status, message, reward=job.reward, job_id=job.job_id,
                       flags=[f.to_flag() for f in findings], outcome=outcome)


class IsolatedJudge:
    """The Judge: the gate in this process, the rest in the evaluator's sandboxed children."""

    def gate(self, job: Job) -> Prepared:
        findings = check_candidate(job.candidate_source, job.problem_source)
        return Prepared(findings, gate_verdict(job, findings))

    def build(self, job: Job, prepared: Prepared, cancel: threading.Event) -> Prepared:
        """Compile the candidate into the keyed build cache (a sandboxed subprocess)."""
        outcome = launch.build(job, cancel=cancel)
        prepared.build = outcome
        if outcome.status in FINAL_BUILD_STATUSES:
            prepared.verdict = build_verdict(job, outcome, prepared.findings)
        return prepared

    def evaluate(self, job: Job, prepared: Prepared, *, on_progress: Progress | None = None,
                 cancel: threading.Event | None = None) -> Result:
        """The evaluator on a candidate that passed the gate; the gate's warnings lead."""
        result = Result.from_json(lane_process.ask(  # LaneFailed: no verdict, the engine says
            job.device, "evaluate", job.to_json(), on_progress, cancel,
            silence_s=SILENCE_FACTOR * job.timeout_s + LANE_SLACK_S))
        result.flags = [f.to_flag() for f in prepared.findings] + result.flags
        return result

    def judge(self, job: Job, *, on_progress: Progress | None = None,
              cancel: threading.Event | None = None) -> Result:
        if on_progress is not None:
            on_progress("gate", 0, 1, "static checks")
        prepared = self.gate(job)
        if prepared.verdict is not None:
            return prepared.verdict
        return self.evaluate(job, prepared, on_progress=on_progress, cancel=cancel)

    def __init__(self) -> None:
        self._passed: dict[str, ProbeResult] = {}  # job -> a passed probe, this process

    def probe(self, job: ProbeJob) -> ProbeResult:
        """The probe of ``job``; a passed one is remembered, so the same job asked again (the
        app's early probe, then its session's) runs once."""
        key = job.to_json()
        if key in self._passed:
            return self._passed[key]
        try:
            result = ProbeResult.from_json(lane_process.ask(
                job.device, "probe", key, silence_s=job.timeout_s + LANE_SLACK_S))
        except LaneFailed as exc:
            return ProbeResult(ok=False, error_kind="crash", message=str(exc))
        if result.ok:
            self._passed = {key: result}  # the latest only: a session probes one problem
        return result


JUDGE: Judge = IsolatedJudge()


def needs_build(code: str) -> bool:
    """Whether importing the candidate compiles an extension (a cheap textual check)."""
    return "load_inline" in code or "cpp_extension" in code


def make_job(problem_source: str, candidate_source: str, **overrides: Any) -> Job:
    """A Job with ``overrides`` applied; unknown names raise ValueError listing the known ones."""
    unknown = set(overrides) - _JOB_FIELDS
    if unknown:
        raise ValueError(f"unknown job setting(s) {', '.join(sorted(unknown))}; known: "
                         f"{', '.join(sorted(_JOB_FIELDS))}")
    reward = overrides.pop("reward", None)
    if isinstance(reward, dict):
        overrides["reward"] = RewardSpec(**reward)
    elif reward is not None:
        overrides["reward"] = reward
    return Job(problem_source=problem_source, candidate_source=candidate_source, **overrides)
