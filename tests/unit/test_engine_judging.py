"""The one evaluate seam: the factory for verdicts reached before any evaluation, and the
gate-then-evaluate path that the engine and the CLI share (nothing is evaluated here)."""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path

from cudal1_evaluator.schema import BuildOutcome, Flag, RewardSpec
from cudal1_tui.judging import JUDGE, IsolatedJudge, Judge, make_job, unevaluated

PROBLEM = textwrap.dedent('''
    import torch
    import torch.nn as nn

    N = 64

    class Model(nn.Module):
        def forward(self, A):
            return torch.relu(A)

    def get_inputs():
        return [torch.randn(N, N)]

    def get_init_inputs():
        return []
''')
PATCHING = textwrap.dedent('''
    import time
    import torch
    import torch.nn as nn

    time.perf_counter = lambda: 0.0

    class ModelNew(nn.Module):
        def forward(self, A):
            return torch.relu(A)
''')


def test_the_engine_judges_through_the_one_judge() -> None:
    from dataclasses import fields

    from cudal1_tui.engine.workspace import Workspace

    judge: Judge = IsolatedJudge()  # the Protocol is satisfied structurally (mypy checks)
    assert isinstance(JUDGE, type(judge))
    assert next(f for f in fields(Workspace) if f.name == "judge").default is JUDGE


def test_unevaluated_scores_the_status_and_keeps_the_build_log() -> None:
    outcome = BuildOutcome(ok=False, status="compile_error", message="nvcc failed",
                           compile_log="err: x", compile_time_s=2.5, cached=False)
    result = unevaluated("compile_error", "nvcc failed", reward=RewardSpec("binary"),
                         job_id="r1", flags=[Flag("static.x", "why", "warn")], outcome=outcome)
    assert (result.status, result.reward, result.reward_formula) == ("compile_error", 0.0,
                                                                     "binary")
    assert result.compile_log == "err: x" and result.wall_time_s == 2.5
    assert result.job_id == "r1" and [f.code for f in result.flags] == ["static.x"]
    refused = unevaluated("rejected", "no code", reward=RewardSpec())
    assert refused.timing == {} and refused.reward_formula == "clipped_speedup"


def test_a_gate_reject_is_the_verdict_before_anything_runs() -> None:
    stages: list[str] = []
    job = make_job(PROBLEM, PATCHING, device="cpu", job_id="c1")
    result = JUDGE.judge(job, on_progress=lambda stage, *_: stages.append(stage))
    assert result.status == "rejected" and result.reward == 0.0 and result.job_id == "c1"
    assert result.message.startswith("static gate: line ")
    assert stages == ["gate"]  # the evaluator was never started
    assert any(f.severity == "reject" for f in result.flags)


def test_the_eval_command_judges_through_the_same_seam(tmp_path: Path) -> None:
    from cudal1_tui.cli.commands import eval_cmd

    (tmp_path / "p.py").write_text(PROBLEM)
    (tmp_path / "c.py").write_text(PATCHING)
    args = argparse.Namespace(problem=tmp_path / "p.py", candidate=tmp_path / "c.py",
                              device="cpu", sizes="full", tolerance="strict", trials=2,
                              budget=1.0, timeout=30.0, torch_compile=False,
                              build_dir=tmp_path / "build")
    job = eval_cmd._job(args)
    assert eval_cmd.judge(job).to_dict() == JUDGE.judge(job).to_dict()
