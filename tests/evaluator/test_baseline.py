"""The baseline is the reference as the user's PyTorch runs it (issue 22): the timed runners
(reference and candidate) start at PyTorch's defaults (cuDNN TF32 on, matmul TF32 off) plus what
the problem file sets at import, named in the result; ``Job.baseline="strict"`` keeps the old
strict fp32 timing. Correctness stays judged against the strict fp32 reference."""

from __future__ import annotations

import pytest
import torch
from evaluator_cases import LINEAR_PROBLEM, job, linear_candidate

from cudal1_evaluator.common import harness
from cudal1_evaluator.launch import evaluate
from cudal1_evaluator.parent import reference_runner

# runs only where the switches are at PyTorch's defaults during its calls
NEEDS_DEFAULTS = linear_candidate(
    "        if not torch.backends.cudnn.allow_tf32 or torch.backends.cuda.matmul.allow_tf32:\n"
    "            raise RuntimeError('not at the PyTorch defaults')\n"
    "        return torch.relu(self.fc(x))")


def test_the_baseline_switches_read_back() -> None:
    try:
        assert harness.baseline_settings("strict")["cudnn.allow_tf32"] is False
        assert harness.baseline_settings("defaults") == harness.TORCH_DEFAULTS
    finally:
        harness.torch_defaults()
    assert torch.backends.cudnn.allow_tf32


def test_the_timed_runners_start_at_pytorch_defaults_and_say_so() -> None:
    result = evaluate(job(LINEAR_PROBLEM, NEEDS_DEFAULTS))
    assert result.status == "ok", result.message
    assert result.precision["baseline"].startswith("eager, PyTorch defaults")
    assert "baseline: eager, PyTorch defaults" in result.message
    assert result.tolerance["judged_against"] == "the strict fp32 reference output"


def test_a_strict_baseline_is_still_available() -> None:
    result = evaluate(job(LINEAR_PROBLEM, NEEDS_DEFAULTS, baseline="strict"))
    assert result.status == "runtime_error" and "not at the PyTorch defaults" in result.message
    honest = evaluate(job(LINEAR_PROBLEM, linear_candidate("        return torch.relu(self.fc(x))"),
                          baseline="strict"))
    assert honest.status == "ok" and honest.precision["baseline"].startswith("eager, strict")


def test_the_reference_runner_follows_the_job_or_is_made_strict() -> None:
    the_job = job(LINEAR_PROBLEM, NEEDS_DEFAULTS)
    assert reference_runner.job(the_job).baseline == "defaults"
    assert reference_runner.job(the_job, baseline="strict").baseline == "strict"


def test_an_unknown_baseline_is_the_callers_mistake() -> None:
    with pytest.raises(ValueError, match="defaults or strict"):
        evaluate(job(LINEAR_PROBLEM, NEEDS_DEFAULTS, baseline="tf32"))
