"""Evaluator jobs built from the settings: what a candidate is measured with."""

from __future__ import annotations

from pathlib import Path

from cudal1_evaluator.schema import Job, ProbeJob, RewardSpec
from cudal1_tui.config import Settings

PROBE_BUDGET_S = 3.0


def candidate_job(settings: Settings, *, problem_source: str, problem_name: str, code: str,
                  device: str, job_id: str, build_root: Path, cuda_arch: str = "") -> Job:
    return Job(
        problem_source=problem_source,
        candidate_source=code,
        device=device,
        job_id=job_id,
        problem_name=problem_name,
        correctness_trials=settings.correctness_trials,
        tolerance=settings.tolerance,
        timing_budget_s=settings.timing_budget_s,
        timeout_s=settings.eval_timeout_s,
        memory_limit_mb=settings.memory_limit_mb or None,
        build_dir=str(build_root),
        compare_torch_compile=settings.compare_torch_compile,
        strict_threshold=settings.strict_threshold,
        reward=RewardSpec(name=settings.reward),
        cuda_arch=cuda_arch,
    )


def probe_job(settings: Settings, *, problem_source: str, problem_name: str,
              device: str) -> ProbeJob:
    return ProbeJob(
        problem_source=problem_source,
        device=device,
        problem_name=problem_name,
        timing_budget_s=min(PROBE_BUDGET_S, settings.timing_budget_s),
        timeout_s=settings.eval_timeout_s,
        memory_limit_mb=settings.memory_limit_mb or None,
    )
