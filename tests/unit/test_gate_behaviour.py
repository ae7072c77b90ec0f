"""The gate judges behaviour, not style: what real kernels do harmlessly passes, with a note.

Own get_inputs copies are ignored (info), writes into a temp dir of the candidate's own are
fine (warning), and a try/except fallback to the reference is a warning statically; the
profile rejects it when it is taken (``cudal1_evaluator.candidate_side.profiling.fallback_flag``).
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import torch

from cudal1_evaluator.candidate_side.profiling import fallback_flag, handled_exceptions
from cudal1_tui.analysis.gate import Finding, check_candidate, rejected

PROBLEM = textwrap.dedent('''
    import torch
    import torch.nn as nn

    M = 128

    class Model(nn.Module):
        def forward(self, A, B):
            return torch.relu(torch.matmul(A, B))

    def get_inputs():
        return [torch.randn(M, M), torch.randn(M, M)]

    def get_init_inputs():
        return []
''')

MODEL_NEW = '''
class ModelNew(nn.Module):
    def forward(self, A, B):
        return torch.relu(A @ B)
'''


def gate(body: str) -> list[Finding]:
    source = "import torch\nimport torch.nn as nn\n" + textwrap.dedent(body) + MODEL_NEW
    return check_candidate(source, PROBLEM)


def by_code(findings: list[Finding]) -> dict[str, str]:
    return {f.code: f.severity for f in findings}


@pytest.mark.parametrize("body", [
    "M = 128\ndef get_inputs():\n    return [torch.randn(M, M).cuda(), torch.randn(M, M).cuda()]\n",
    "def get_inputs():\n    return [torch.randn(8, 8), torch.randn(8, 8)]\n",
    "def get_init_inputs():\n    return [3]\n",
])
def test_own_get_inputs_is_an_info_note(body: str) -> None:
    findings = gate(body)
    assert by_code(findings).get("own_inputs") == "info"
    assert not rejected(findings)
    assert any("ignored" in f.reason for f in findings if f.code == "own_inputs")


TEMP_WRITES = {
    "mkdtemp_join_open": '''
        import os
        import tempfile
        from torch.utils.cpp_extension import load
        SRC = "__global__ void k() {}"
        build_dir = tempfile.mkdtemp(prefix="ext_")
        path = os.path.join(build_dir, "k.cu")
        with open(path, "w") as fh:
            fh.write(SRC)
    ''',
    "pathlib_write_text": '''
        import tempfile
        from pathlib import Path
        tmp = Path(tempfile.gettempdir()) / "my_ext"
        (tmp / "k.cu").write_text("__global__ void k() {}")
    ''',
    "with_temporary_directory": '''
        import tempfile
        import shutil
        with tempfile.TemporaryDirectory() as d:
            src = d + "/k.cu"
            open(src, "w").write("x")
        work = tempfile.mkdtemp()
        shutil.rmtree(work, ignore_errors=True)
    ''',
    "self_attribute": '''
        import tempfile
        import os

        class Builder:
            def __init__(self):
                self.dir = tempfile.mkdtemp()
                self.src = os.path.join(self.dir, "k.cu")
                with open(self.src, "w") as fh:
                    fh.write("x")
    ''',
    "named_temporary_file": '''
        import tempfile
        with tempfile.NamedTemporaryFile("w", suffix=".cu", delete=False) as fh:
            fh.write("x")
    ''',
}


@pytest.mark.parametrize("name", sorted(TEMP_WRITES))
def test_writes_into_its_own_temp_dir_pass(name: str) -> None:
    findings = gate(TEMP_WRITES[name])
    assert not rejected(findings), findings
    assert "file_write" not in by_code(findings)


@pytest.mark.parametrize("body", [
    "import os\nwith open(os.path.expanduser('~/x.cu'), 'w') as fh:\n    fh.write('x')\n",
    "import tempfile\nd = tempfile.mkdtemp()\nopen('/etc/x', 'w')\n",
    "import shutil\nshutil.rmtree('/work')\n",
    "import tempfile\nimport shutil\nd = tempfile.mkdtemp()\nshutil.copy(d, '/x')\n",
])
def test_writes_elsewhere_still_rejected(body: str) -> None:
    assert "file_write" in {f.code for f in rejected(gate(body))}


def test_try_except_fallback_is_a_warning() -> None:
    findings = check_candidate(textwrap.dedent('''
        import torch
        import torch.nn as nn

        class ModelNew(nn.Module):
            def forward(self, A, B):
                try:
                    return my_ext.fused(A, B)
                except RuntimeError:
                    return torch.relu(torch.matmul(A, B))
    '''), PROBLEM)
    assert by_code(findings).get("reference_fallback") == "warn"
    assert not rejected(findings)


REF = [("ampere_sgemm_128x64_nn", 50.0, 1), ("vectorized_elementwise_kernel<relu>", 5.0, 1)]


def test_profile_rejects_a_taken_fallback() -> None:
    flag = fallback_flag(REF, list(REF), {"fused_gemm_relu"})
    assert flag is not None and flag.code == "fallback_taken" and flag.severity == "reject"
    assert "fused_gemm_relu" in flag.reason


def test_profile_accepts_own_kernels_and_undeclared_ones() -> None:
    own = [("fused_gemm_relu_kernel(float const*)", 40.0, 1)]
    assert fallback_flag(REF, own, {"fused_gemm_relu"}) is None
    # a CUDA graph or cudnn.benchmark candidate declares no kernels: same kernels are fine
    assert fallback_flag(REF, list(REF), set()) is None


def test_profile_warns_when_a_declared_kernel_is_dead_code() -> None:
    other = [("cutlass_80_tensorop_gemm", 30.0, 1)]
    flag = fallback_flag(REF, other, {"fused_gemm_relu"})
    assert flag is not None and flag.severity == "warn" and flag.code == "custom_kernel_unused"


def test_profile_rejects_a_fallback_branch_that_ran() -> None:
    """Library kernels other than the reference's, but the call caught an exception in the
    candidate's own code: the except branch is what ran (a kernel called with the wrong
    arguments every time)."""
    other = [("cutlass_80_tensorop_gemm", 30.0, 1)]
    flag = fallback_flag(REF, other, {"fused_gemm_relu"}, ["TypeError at line 12"])
    assert flag is not None and flag.code == "fallback_taken" and flag.severity == "reject"
    assert "TypeError at line 12" in flag.reason and "silent fallback" in flag.reason


FALLING_BACK = textwrap.dedent('''
    def kernel(x):
        raise TypeError("incompatible function arguments")

    def forward(args):
        try:
            return kernel(args[0])
        except (RuntimeError, TypeError):
            return args[0] * 2

    def failing(args):
        return kernel(args[0])
''')


def _compiled(tmp_path: Path) -> tuple[dict[str, Any], str]:
    path = tmp_path / "candidate.py"
    path.write_text(FALLING_BACK)
    namespace: dict[str, Any] = {}
    exec(compile(FALLING_BACK, str(path), "exec"), namespace)
    return namespace, str(path)


def test_exceptions_the_candidates_call_caught_are_named(tmp_path: Path) -> None:
    code, path = _compiled(tmp_path)
    caught = handled_exceptions(code["forward"], [torch.ones(2)], path)
    assert len(caught) == 1 and caught[0].startswith("TypeError at line ")
    assert "incompatible function arguments" in caught[0]
    assert sys.gettrace() is None  # the trace is removed again
    # a call that fails is not a fallback; code outside the candidate's file is not watched
    assert handled_exceptions(code["failing"], [torch.ones(2)], path) == []
    assert handled_exceptions(code["forward"], [torch.ones(2)], "/elsewhere.py") == []
    # the inputs are copies: an in-place candidate cannot touch the caller's tensors
    x = torch.ones(2)
    handled_exceptions(lambda a: a[0].mul_(3), [x], path)
    assert torch.equal(x, torch.ones(2))


BN_PROBLEM = textwrap.dedent('''
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.bn = nn.BatchNorm1d(8)
            {switch}

        def forward(self, x):
            return self.bn(x)

    def get_inputs():
        return [torch.randn(4, 8)]

    def get_init_inputs():
        return []
''')

BN_CANDIDATE = textwrap.dedent('''
    import torch
    import torch.nn as nn

    class ModelNew(nn.Module):
        def __init__(self):
            super().__init__()
            self.bn = nn.BatchNorm1d(8)
            self.eval()

        def forward(self, x):
            return self.bn(x)
''')


def test_eval_mode_switch_warned_against_a_training_mode_reference() -> None:
    findings = check_candidate(BN_CANDIDATE, BN_PROBLEM.format(switch="pass"))
    assert by_code(findings).get("mode_switch") == "warn"
    assert not rejected(findings)


def test_eval_mode_matching_the_reference_is_silent() -> None:
    findings = check_candidate(BN_CANDIDATE, BN_PROBLEM.format(switch="self.eval()"))
    assert "mode_switch" not in by_code(findings)
