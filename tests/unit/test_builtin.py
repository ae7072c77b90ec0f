"""The built-in proposer: every strategy writes a real ModelNew module with Model's signatures."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cudal1_tui.analysis.gate import check_candidate
from cudal1_tui.llm.parsing import syntax_error
from cudal1_tui.llm.signature_check import check_signature
from cudal1_tui.problem.inspect import inspect_source
from cudal1_tui.problem.signature import class_signature_of
from cudal1_tui.proposers import BuiltinCandidate, propose
from cudal1_tui.proposers.strategies.diag import find_rewrites

ROOT = Path(__file__).resolve().parents[2]
HEADER = "import torch\nimport torch.nn as nn\n\n"
HARNESS = """

def get_inputs():
    return [torch.randn(N), torch.randn(N, M)]


def get_init_inputs():
    return []
"""

DIAG_FORMS = {
    "matmul_operator": "torch.diag(A) @ B",
    "matmul_call": "torch.matmul(torch.diag(A), B)",
    "mm_call": "torch.mm(torch.diag(A), B)",
}


def diag_problem(expr: str = "torch.diag(A) @ B") -> str:
    return HEADER + textwrap.dedent(f"""\
        N = 16
        M = 8


        class Model(nn.Module):
            \"\"\"Scales rows by a diagonal.\"\"\"

            def __init__(self):
                super(Model, self).__init__()

            def forward(self, A, B):
                return {expr}
        """) + HARNESS


COLUMN_DIAG = HEADER + textwrap.dedent("""\
    N = 16
    M = 8


    class Model(nn.Module):
        def forward(self, A, B):
            return B.t() @ torch.diag(A)
    """) + HARNESS

MATMUL = HEADER + textwrap.dedent("""\
    N = 16
    M = 8


    class Model(nn.Module):
        def __init__(self):
            super().__init__()

        def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
            return torch.matmul(A, B)
    """) + HARNESS

CONV = HEADER + textwrap.dedent("""\
    class Model(nn.Module):
        def __init__(self, in_channels: int, out_channels: int, kernel_size: int = 3,
                     *, bias: bool = True):
            super().__init__()
            self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, bias=bias)

        def forward(self, x, scale=1.0):
            return torch.relu(self.conv(x)) * scale


    def get_inputs():
        return [torch.randn(2, 3, 12, 12)]


    def get_init_inputs():
        return [3, 4]


    if __name__ == "__main__":
        print(Model(3, 4)(*get_inputs()).shape)
    """)

PROBLEMS = {"diag": diag_problem(), "matmul": MATMUL, "conv": CONV}


def candidates(source: str, device: str) -> list[BuiltinCandidate]:
    return propose(source, inspect_source(source, "problem.py"), device)


def by_strategy(cands: list[BuiltinCandidate]) -> dict[str, BuiltinCandidate]:
    return {c.strategy: c for c in cands}


@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_every_candidate_parses_and_keeps_model_signatures(name: str, device: str) -> None:
    source = PROBLEMS[name]
    reference = class_signature_of(source, "Model")
    assert reference is not None
    cands = candidates(source, device)
    assert cands, "every valid problem gets at least torch.compile"
    for cand in cands:
        assert cand.source == f"builtin:{cand.strategy}"
        assert syntax_error(cand.code) == "", (cand.strategy, cand.code)
        compile(cand.code, cand.strategy, "exec")  # Python agrees with tree-sitter
        mine = class_signature_of(cand.code, "ModelNew")
        assert mine is not None, cand.strategy
        assert mine.forward is not None and mine.init is not None, cand.strategy
        errors, _ = check_signature(mine, reference, strict_names=True)
        assert errors == [], (cand.strategy, errors)
        # The harness owns inputs: no candidate defines its own.
        assert "def get_inputs" not in cand.code and "def get_init_inputs" not in cand.code
        assert "__main__" not in cand.code


def test_strategies_per_device() -> None:
    cuda = by_strategy(candidates(CONV, "cuda"))
    assert set(cuda) == {
        "torch-compile-default", "torch-compile-reduce-overhead",
        "torch-compile-max-autotune-no-cudagraphs", "cuda-graph", "channels-last",
    }
    cpu = by_strategy(candidates(CONV, "cpu"))
    assert set(cpu) == {"torch-compile-default", "channels-last"}
    assert cpu["torch-compile-default"].requires == ("c++ compiler",)
    assert "C++ compiler" in cpu["torch-compile-default"].description
    assert 'mode="reduce-overhead"' in cuda["torch-compile-reduce-overhead"].code
    # it clones its results, so the gate's CUDA-graph output warning stays quiet
    gate = check_candidate(cuda["torch-compile-reduce-overhead"].code, CONV)
    assert "cuda_graph_outputs" not in {f.code for f in gate}


def test_channels_last_only_for_convolutions() -> None:
    assert "channels-last" not in by_strategy(candidates(MATMUL, "cuda"))
    code = by_strategy(candidates(CONV, "cuda"))["channels-last"].code
    assert "memory_format=torch.channels_last" in code


def test_cuda_graph_copies_new_inputs_every_call() -> None:
    code = by_strategy(candidates(MATMUL, "cuda"))["cuda-graph"].code
    assert "static.copy_(value)" in code and "self._graph.replay()" in code
    assert "torch.cuda.Stream" not in code  # no side streams of its own


def test_diag_rewrite_proposed_for_diag_not_for_plain_matmul() -> None:
    assert "diag-broadcast" in by_strategy(candidates(diag_problem(), "cpu"))
    assert "diag-broadcast" not in by_strategy(candidates(MATMUL, "cpu"))
    assert find_rewrites(MATMUL) == []


@pytest.mark.parametrize("form", sorted(DIAG_FORMS))
def test_diag_rewrite_recognises_each_form(form: str) -> None:
    code = by_strategy(candidates(diag_problem(DIAG_FORMS[form]), "cpu"))["diag-broadcast"].code
    assert "A.unsqueeze(-1) * B" in code
    assert "torch.diag" not in code
    assert "class ModelNew" in code and "super(ModelNew, self)" in code


def test_diag_rewrite_on_the_right_scales_columns() -> None:
    code = by_strategy(candidates(COLUMN_DIAG, "cpu"))["diag-broadcast"].code
    assert "return B.t() * A" in code


def test_invalid_problem_gets_no_candidates() -> None:
    assert propose("x = 1\n", inspect_source("x = 1\n", "bad.py"), "cpu") == []


RUN_CPU_CANDIDATES = """
import json, sys, torch
from cudal1_evaluator.candidate_side.integrity import check_candidate_namespace
problems = json.loads(sys.stdin.read())
out = []
for item in problems:
    ref_ns, new_ns = {}, {}
    exec(compile(item["problem"], "problem", "exec"), ref_ns)
    exec(compile(item["code"], item["strategy"], "exec"), new_ns)
    flags = check_candidate_namespace(ref_ns, new_ns)
    if flags or not item["run"]:
        out.append([item["strategy"], [f.code for f in flags]])
        continue
    init = ref_ns["get_init_inputs"]()
    torch.manual_seed(0)
    ref = ref_ns["Model"](*init)
    torch.manual_seed(0)
    new = new_ns["ModelNew"](*init)
    new.load_state_dict(ref.state_dict())
    inputs = ref_ns["get_inputs"]()
    out.append([item["strategy"], bool(torch.allclose(ref(*inputs), new(*inputs), atol=1e-5))])
print(json.dumps(out))
"""


def test_candidates_pass_the_evaluators_namespace_check_and_compute_the_reference() -> None:
    """Every candidate (CUDA ones included) passes the evaluator's runtime namespace check:
    ModelNew does not derive from the reference. The ones that need neither a compiler nor
    a GPU also run, in a subprocess, and match the reference."""
    items = []
    for source in (diag_problem(), diag_problem(DIAG_FORMS["matmul_call"]), COLUMN_DIAG, CONV):
        for device in ("cpu", "cuda"):
            for cand in candidates(source, device):
                run = device == "cpu" and not cand.strategy.startswith("torch-compile")
                items.append({"problem": source, "code": cand.code, "strategy": cand.strategy,
                              "run": run})
    done = subprocess.run([sys.executable, "-c", RUN_CPU_CANDIDATES], input=json.dumps(items),
                          capture_output=True, text=True, timeout=120, check=True, cwd=ROOT)
    results = json.loads(done.stdout)
    assert len(results) == len(items)
    assert all(verdict in ([], True) for _, verdict in results), results
    assert sum(verdict is True for _, verdict in results) == 4  # ran and matched
