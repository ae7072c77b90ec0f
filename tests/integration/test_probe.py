"""The probe: executing a problem once, in process (``trusted.problem_probe``) and isolated
(the client)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from cudal1_evaluator.schema import ProbeJob, ProbeResult
from cudal1_evaluator.trusted.output_sensitivity import DEGENERATE_REL
from cudal1_evaluator.trusted.problem_probe import run_probe
from cudal1_tui.problem.probing import probe_problem

PROBE_MODULE = "cudal1_evaluator.trusted.problem_probe"
RUNTIME = Path(__file__).resolve().parents[1] / "data" / "broken_problems" / "runtime"

GOOD = '''\
import torch
import torch.nn as nn

batch = 16
width = 32


class Model(nn.Module):
    def __init__(self, width: int, scale: float):
        super().__init__()
        self.linear = nn.Linear(width, width)
        self.scale = scale

    def forward(self, x: torch.Tensor, y: torch.Tensor):
        h = self.linear(x) * self.scale
        return h, (h * y).sum(dim=-1)


def get_inputs():
    print("problem files may print; the probe's JSON stays clean")
    return [torch.randn(batch, width), torch.randn(batch, width)]


def get_init_inputs():
    return [width, 0.5]
'''

# file -> (error_kind, fragments of the message)
FAILURES: dict[str, tuple[str, tuple[str, ...]]] = {
    "raises_in_forward.py": ("raises", (
        "RuntimeError: mat1 and mat2 shapes cannot be multiplied",
        "while running Model.forward at raises_in_forward.py line 7: `y = x @ x`")),
    "raises_in_init.py": ("raises", (
        "while building Model(*get_init_inputs())", "raises_in_init.py line 8")),
    "import_error.py": ("raises", (
        "ModuleNotFoundError", "while importing the problem file",
        "import_error.py line 3: `import not_a_real_package_xyz`")),
    "non_tensor_output.py": ("non_tensor_output", ("forward returned float",)),
    "inputs_not_a_list.py": ("bad_inputs", ("get_inputs() must return a list of tensors, "
                                            "got Tensor",)),
    "inputs_hold_an_int.py": ("bad_inputs", ("get_inputs() element 1 is int (4)",
                                             "get_init_inputs()")),
    "softmax_then_sum.py": ("degenerate", ("barely depends on the inputs",
                                           "Every output element is 1",
                                           "softmax then sum over the same axis is always 1",
                                           "rewards cheating")),
    "nearly_constant.py": ("degenerate", ("barely depends on the inputs",)),
    "seedless_inputs.py": ("degenerate", ("returns the same tensors for every seed",)),
    "random_forward.py": ("nondeterministic", ("the same inputs gave outputs differing",)),
    "all_nan.py": ("non_finite", ("every output element is NaN or Inf",)),
}


def _job(source: str, name: str = "problem", **kw: object) -> ProbeJob:
    return ProbeJob(problem_source=source, problem_name=name, timing_budget_s=0.1, **kw)  # type: ignore[arg-type]


def test_good_problem_is_described() -> None:
    result = run_probe(_job(GOOD))
    assert result.ok, result.message
    assert [(s.shape, s.dtype, s.device) for s in result.inputs] == [
        ([16, 32], "float32", "cpu")] * 2
    assert [s.shape for s in result.outputs] == [[16, 32], [16]]
    assert result.init_inputs == [32, 0.5]
    assert result.parameter_count == 32 * 32 + 32
    assert result.reference_time_ms is not None and 0 < result.reference_time_ms < 1000
    assert result.input_sensitivity is not None and result.input_sensitivity > 0.1
    assert result.device["type"] == "cpu"
    assert result.versions["torch"] == torch.__version__
    assert result.error_kind == "" and result.message == ""


@pytest.mark.parametrize("name", sorted(FAILURES))
def test_runtime_failures(name: str) -> None:
    kind, fragments = FAILURES[name]
    result = run_probe(_job((RUNTIME / name).read_text(), name.removesuffix(".py")))
    assert not result.ok
    assert result.error_kind == kind, result.message
    for fragment in fragments:
        assert fragment in result.message


def test_degenerate_sensitivity_is_recorded() -> None:
    result = run_probe(_job((RUNTIME / "softmax_then_sum.py").read_text()))
    assert result.input_sensitivity is not None
    assert result.input_sensitivity < DEGENERATE_REL


def test_small_but_real_dependence_is_not_degenerate() -> None:
    source = GOOD.replace("return h, (h * y).sum(dim=-1)", "return 1.0 + 1e-4 * h")
    result = run_probe(_job(source))
    assert result.ok, result.message
    assert result.input_sensitivity is not None and result.input_sensitivity > DEGENERATE_REL


def test_partial_nan_output_is_a_warning() -> None:
    source = GOOD.replace("return h, (h * y).sum(dim=-1)", "return torch.sqrt(h)")
    result = run_probe(_job(source))
    assert result.ok
    assert "output elements are NaN or Inf" in result.message


def test_unavailable_device() -> None:
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    result = run_probe(_job(GOOD, device="cuda"))
    assert (result.ok, result.error_kind) == (False, "device")
    assert "sees no CUDA GPU" in result.message


def test_module_main_writes_json(tmp_path: Path) -> None:
    job_path, out_path = tmp_path / "job.json", tmp_path / "result.json"
    job_path.write_text(_job(GOOD).to_json())
    done = subprocess.run([sys.executable, "-m", PROBE_MODULE, str(job_path)],
                          capture_output=True, text=True, check=True)
    assert ProbeResult.from_json(done.stdout).ok
    assert "problem files may print" in done.stderr
    subprocess.run([sys.executable, "-m", PROBE_MODULE, str(job_path), str(out_path)],
                   check=True, capture_output=True)
    assert ProbeResult.from_json(out_path.read_text()).outputs[1].shape == [16]


# ---------------------------------------------------------------- isolated, through the client


def test_client_probes_in_a_child(tmp_path: Path) -> None:
    path = tmp_path / "good.py"
    path.write_text(GOOD)
    result = probe_problem(path, timing_budget_s=0.1)
    assert result.ok, result.message
    assert result.parameter_count == 32 * 32 + 32
    failed = probe_problem(str(RUNTIME / "raises_in_forward.py"), timing_budget_s=0.1)
    assert failed.error_kind == "raises"
    assert "raises_in_forward.py line 7" in failed.message


def test_client_timeout() -> None:
    result = probe_problem(RUNTIME / "sleeps.py", timeout_s=3)
    assert (result.ok, result.error_kind) == (False, "timeout")


def test_cli_inspect_probes(tmp_path: Path) -> None:
    good = tmp_path / "good.py"
    good.write_text(GOOD)
    done = subprocess.run(
        [sys.executable, "-m", "cudal1_tui", "inspect", str(good),
         str(RUNTIME / "softmax_then_sum.py")],
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr
    for fragment in ("float32[16, 32] on cpu", "parameters", "1,056", "reference time",
                     "input sensitivity", "the probe failed (degenerate)",
                     "softmax then sum over the same axis is always 1"):
        assert fragment in done.stdout
    assert "Traceback" not in done.stdout + done.stderr


def test_cli_inspect_json(tmp_path: Path) -> None:
    good = tmp_path / "good.py"
    good.write_text(GOOD)
    done = subprocess.run([sys.executable, "-m", "cudal1_tui", "inspect", "--json", str(good)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    (report,) = json.loads(done.stdout)
    assert report["ok"] and report["probe"]["outputs"][0]["shape"] == [16, 32]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_probe_on_gpu() -> None:
    result = run_probe(_job(GOOD, device="cuda"))
    assert result.ok, result.message
    assert result.inputs[0].device == "cuda:0"
    assert result.device["type"] == "cuda" and result.device["name"]
    assert result.versions["cuda"]
