"""Precision from what runs (issue 22), never from source text: a half-precision branch that
never runs leaves the candidate at the baseline's precision (no matched reference, no 0.25x);
reduced dtypes that do reach its ops get the matched reference and a flag."""

from __future__ import annotations

import pytest
import torch
from evaluator_cases import LINEAR_PROBLEM, job

from cudal1_evaluator.candidate_side import dtype_watch
from cudal1_evaluator.launch import evaluate
from cudal1_evaluator.parent import precision

HEADER = '''
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.fc = nn.Linear(d_in, d_out)
        self.use_half = None
'''

# benchmarks a bf16 path on its first call, then keeps the fp32 one for good
AUTOTUNE_KEEPS_FP32 = HEADER + '''
    def forward(self, x):
        if self.use_half is None:
            w, b = self.fc.weight, self.fc.bias
            half = torch.relu(x.bfloat16() @ w.bfloat16().t() + b.bfloat16()).float()
            del half  # "too slow on this device": keep fp32
            self.use_half = False
        if self.use_half:
            return torch.relu(self.fc(x.half()).float())
        return torch.relu(self.fc(x))
'''

ALWAYS_BF16 = HEADER + '''
    def forward(self, x):
        w, b = self.fc.weight.bfloat16(), self.fc.bias.bfloat16()
        return torch.relu(x.bfloat16() @ w.t() + b).float()
'''


def test_a_half_type_in_the_text_alone_decides_nothing() -> None:
    info = precision.classify({}, "if False:\n    A = A.half()\n")
    assert info["candidate"] == "fp32" and info["reference"] == precision.BASELINE
    assert info["source_hint"] == "fp16" and not precision.matched_differs(info)


def test_reduced_dtypes_seen_at_run_time_get_a_matched_reference() -> None:
    seen = {precision.OBSERVED_KEY: {"before": None, "after": ["bfloat16"]}}
    info = precision.classify(seen, "")  # type: ignore[arg-type]
    assert info["candidate"] == "bf16" and info["reference"] == "autocast-bf16"
    assert info["autocast"] == "bf16" and precision.matched_differs(info)


def test_the_watch_sees_dtypes_that_reach_ops_only() -> None:
    assert dtype_watch.OBSERVED_KEY == precision.OBSERVED_KEY
    seen: set[torch.dtype] = set()
    x = torch.randn(4, 4)
    dtype_watch.watched(lambda: (x.bfloat16() * 2).float() if False else x * 2, seen)
    assert dtype_watch.reduced(seen, ["float32"]) == []
    dtype_watch.watched(lambda: (x.bfloat16() * 2).float(), seen)
    assert dtype_watch.reduced(seen, ["float32"]) == ["bfloat16"]
    assert dtype_watch.reduced(seen, ["bfloat16"]) == []  # not narrower than the problem's


def test_a_first_call_benchmark_of_a_half_path_keeps_the_baseline() -> None:
    result = evaluate(job(LINEAR_PROBLEM, AUTOTUNE_KEEPS_FP32))
    assert result.status == "ok", result.message
    assert result.precision["candidate"] == "fp32"
    assert result.precision["reference"] == precision.BASELINE
    assert result.precision.get("source_hint") == "fp16+bf16"
    assert "reference_matched" not in result.timing and result.speedup_strict is None
    assert "precision_lowered" not in {f.code for f in result.flags}


def test_bf16_math_on_every_call_is_compared_at_its_precision_and_flagged() -> None:
    result = evaluate(job(LINEAR_PROBLEM, ALWAYS_BF16, tolerance="relaxed"))
    assert result.status == "ok", result.message
    assert result.precision["candidate"] == "bf16"
    assert result.precision["reference"] == "autocast-bf16"
    assert result.timing["reference_matched"].n > 0 and result.speedup_strict is not None
    flag = next(f for f in result.flags if f.code == "precision_lowered")
    assert flag.severity == "warn" and "relaxed (fp32 0.01)" in flag.reason


def test_the_watch_leaves_torch_compiled_code_compiled() -> None:
    """A dispatch mode around a call of torch.compile'd code left it running at eager speed
    for good (8 → 29 ms a call on a CPU; an H200 corpus pair 6.5× → 0.98×): dynamo skips a
    frame met under the mode, and keeps skipping it. After every watched call dynamo's caches
    are reset, so the next, unwatched call compiles it again; and the watch still runs where
    compiled code exists (a dummy compile must not hide eager half-precision work)."""
    import torch._dynamo
    from torch._C._dynamo.eval_frame import _debug_get_cache_entry_list

    def chain(x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(x) * x + 1.0

    torch._dynamo.reset()
    compiled = torch.compile(chain, backend="eager")
    x = torch.randn(8, 8)
    compiled(x)
    assert len(_debug_get_cache_entry_list(chain.__code__)) == 1
    seen: set[torch.dtype] = set()
    out = dtype_watch.watched_then_reset(lambda: compiled(x), seen)
    assert torch.equal(out, chain(x))
    compiled(x)  # unwatched: compiled afresh, not skipped
    assert len(_debug_get_cache_entry_list(chain.__code__)) == 1
    seen.clear()
    dtype_watch.watched_then_reset(lambda: x.half() @ x.half(), seen)
    assert torch.float16 in seen  # compiled graphs in the process do not switch it off


def test_compiled_code_first_met_under_the_watch_is_compiled_afterwards() -> None:
    """Dynamo is handed the frame inside the watched call (a candidate that compiles on its
    second call): the reset still follows, and the next call compiles."""
    import torch._dynamo
    from torch._C._dynamo.eval_frame import _debug_get_cache_entry_list

    def late(x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x) * 2.0

    torch._dynamo.reset()
    compiled = torch.compile(late, backend="eager")
    x = torch.randn(4, 4)
    dtype_watch.watched_then_reset(lambda: compiled(x), set())
    compiled(x)
    assert len(_debug_get_cache_entry_list(late.__code__)) == 1


def test_no_dynamo_reset_where_dynamo_never_ran(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plain candidate does not pay the reset (seconds on a GPU: Inductor's and Triton's
    imports); one that compiled does."""
    import torch._dynamo

    torch._dynamo.reset()
    resets: list[int] = []
    real_reset = torch._dynamo.reset
    monkeypatch.setattr(torch._dynamo, "reset", lambda: resets.append(1) or real_reset())
    x = torch.randn(4, 4)
    dtype_watch.watched_then_reset(lambda: x @ x, set())
    assert resets == []
    compiled = torch.compile(lambda t: t * 3.0, backend="eager")
    compiled(x)
    dtype_watch.watched_then_reset(lambda: compiled(x), set())
    assert resets == [1]
