"""Gate, then evaluate: the one call the engine and the CLI make to judge a candidate.

The static gate reads the candidate here (tree-sitter, no code runs); a ``reject`` finding
returns a ``rejected`` Result at once. Otherwise the job goes to ``launch.evaluate``,
which runs everything in isolated subprocesses (this process never imports torch), and the
gate's warnings are prepended to the result's flags.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import fields
from typing import Any

from cudal1_evaluator.reward import score
from cudal1_evaluator.schema import Job, Result, RewardSpec
from cudal1_tui.analysis.gate import Finding, check_candidate, rejected

Progress = Callable[[str, int, int, str], None]

_JOB_FIELDS = frozenset(f.name for f in fields(Job)) - {"problem_source", "candidate_source"}


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


def gate_result(job: Job, findings: list[Finding] | None = None) -> Result | None:
    """A ``rejected`` Result if the static gate rejects the candidate, else None."""
    if findings is None:
        findings = check_candidate(job.candidate_source, job.problem_source)
    bad = rejected(findings)
    if not bad:
        return None
    scored = score(job.reward.name, job.reward.params, "rejected", None)
    reasons = "; ".join(f"line {f.line}: {f.reason}" if f.line else f.reason for f in bad)
    return Result(status="rejected", message=f"static gate: {reasons}",
                  flags=[f.to_flag() for f in findings], reward=scored.reward,
                  reward_formula=scored.formula, reward_params=scored.params, job_id=job.job_id)


def evaluate_job(job: Job, *, gate: bool = True, on_progress: Progress | None = None,
                 cancel: threading.Event | None = None) -> Result:
    """The gate (unless ``gate=False``), then the isolated evaluation."""
    findings: list[Finding] = []
    if gate:
        if on_progress is not None:
            on_progress("gate", 0, 1, "static checks")
        findings = check_candidate(job.candidate_source, job.problem_source)
        stopped = gate_result(job, findings)
        if stopped is not None:
            return stopped
    from cudal1_evaluator.launch import evaluate  # torch-free, but only needed past the gate

    result = evaluate(job, on_progress=on_progress, cancel=cancel)
    result.flags = [f.to_flag() for f in findings] + result.flags
    return result


def evaluate_candidate(problem_source: str, candidate_source: str, *, gate: bool = True,
                       on_progress: Progress | None = None,
                       cancel: threading.Event | None = None, **job_overrides: Any) -> Result:
    """Judge one candidate against one problem (``job_overrides`` are ``Job`` fields)."""
    job = make_job(problem_source, candidate_source, **job_overrides)
    return evaluate_job(job, gate=gate, on_progress=on_progress, cancel=cancel)
