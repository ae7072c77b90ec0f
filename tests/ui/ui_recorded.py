"""A recorded session for UI tests: real event dataclasses and real trace records.

The snapshot tests feed these instead of live timings so the screen they capture
never depends on how fast this machine happened to be.
"""

from __future__ import annotations

from cudal1_evaluator.schema import Flag, Result, TimingSummary, TrialReport
from cudal1_tui.engine import events as ev
from cudal1_tui.records import CandidateRecord, ParsedSections

REFERENCE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x) * 2.0


def get_inputs():
    return [torch.randn(256, 256)]


def get_init_inputs():
    return []
'''

BUILTIN = REFERENCE.replace("class Model(", "class ModelNew(").replace(
    "return torch.relu(x) * 2.0", "return torch.relu(x).mul_(2.0)"
)

CUDA_VARIANT = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = """
#include <torch/extension.h>

__global__ void relu2_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? 2.f * x[i] : 0.f;
}

torch::Tensor relu2(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    relu2_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

relu2 = load_inline(name="relu2", cpp_sources="torch::Tensor relu2(torch::Tensor x);",
                    cuda_sources=cuda_source, functions=["relu2"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return relu2.relu2(x)
'''

ANALYSIS = "ReLU followed by a scale reads and writes the tensor twice; memory bound."
DESIGN = "Fuse both into **one kernel**: one read, one write, 256 threads per block."
REASONING = "The op is element-wise, so fusing halves the memory traffic."
RESPONSE = f"## Performance Analysis\n{ANALYSIS}\n\n## Algorithm Design\n{DESIGN}\n\n" \
    f"## Code Implementation\n```python\n{CUDA_VARIANT}```\n"


def _timing(ms: float) -> TimingSummary:
    samples = [ms * 0.97, ms, ms * 1.03]
    return TimingSummary(samples_ms=samples, median_ms=ms, p10_ms=samples[0], p90_ms=samples[-1],
                         mean_ms=ms, spread=0.06, n=3, clock="perf_counter")


def _result(status: str, speedup: float | None, **kw: object) -> Result:
    trials = [TrialReport(trial=i, ok=status == "ok", max_abs_err=2.4e-7 * (i + 1))
              for i in range(3)] if status in ("ok", "rejected") else []
    timing = {"reference": _timing(0.5), "candidate": _timing(0.5 / speedup)} if speedup else {}
    result = Result(status=status, correct=status == "ok", speedup=speedup,  # type: ignore[arg-type]
                    trials=trials, timing=timing, **kw)  # type: ignore[arg-type]
    return result


def _record(round_: int, slot: int, source: str, code: str, status: str,
            speedup: float | None, **kw: object) -> CandidateRecord:
    result = kw.pop("result", None) or _result(status, speedup)
    return CandidateRecord(
        record_id=f"r{round_}s{slot}", session_id="20260101-000000_relu2_demo", round=round_,
        slot=slot, source=source, problem_name="relu2", code=code, result=result,  # type: ignore[arg-type]
        reward=speedup or 0.0, reward_formula="clipped_speedup", status=status, speedup=speedup,
        **kw,  # type: ignore[arg-type]
    )


def records() -> list[CandidateRecord]:
    compile_log = ("relu2.cu(7): error: identifier \"blockIdx\" is undefined\n"
                   "1 error detected in the compilation of \"relu2.cu\".")
    flagged = _result("rejected", 9.7, flags=[Flag("input_mutation", "the candidate wrote to "
                                                    "its input tensor x")])
    return [
        _record(1, 0, "builtin:inplace_ops", BUILTIN, "ok", 1.12),
        _record(1, 1, "model", CUDA_VARIANT, "ok", 1.84, model="cuda-l1-demo",
                raw_response=RESPONSE, reasoning=REASONING,
                sections=ParsedSections(ANALYSIS, DESIGN, CUDA_VARIANT)),
        _record(2, 0, "model", CUDA_VARIANT.replace("#include <torch/extension.h>", ""),
                "compile_error", None, model="cuda-l1-demo",
                result=_result("compile_error", None, compile_log=compile_log,
                               message="nvcc failed")),
        _record(2, 1, "model", BUILTIN.replace("mul_(2.0)", "mul_(2.0)  # in place"),
                "rejected", 9.7, result=flagged, model="cuda-l1-demo"),
    ]


def opening_events() -> list[ev.EngineEvent]:
    return [
        ev.SessionOpened("20260101-000000_relu2_demo", "/sessions/20260101-000000_relu2_demo",
                         "relu2", resumed=False),
        ev.ProbeFinished(True, "reference ok: 1 input (256, 256) float32", 0.5, None, "cpu"),
    ]


def streaming_events() -> list[ev.EngineEvent]:
    return [
        ev.RoundStarted(1, 2),
        ev.StageChanged(1, 1, "generating", "cuda-l1-demo"),
        ev.StreamChunk(1, 1, "reasoning", REASONING, tokens=14, tokens_per_s=41.0),
        ev.StreamChunk(1, 1, "content", RESPONSE[:260], tokens=96, tokens_per_s=42.0),
    ]


def result_events() -> list[ev.EngineEvent]:
    return [
        ev.CandidateFinished(1, 0, "r1s0", "builtin:inplace_ops", "ok", 1.12, 1.12),
        ev.CandidateFinished(1, 1, "r1s1", "model", "ok", 1.84, 1.84),
        ev.RoundFinished(1, 1.84),
        ev.CandidateFinished(2, 0, "r2s0", "model", "compile_error", None, 0.0),
        ev.CandidateFinished(2, 1, "r2s1", "model", "rejected", 9.7, 0.0, ("input_mutation",)),
        ev.RoundFinished(2, 1.84),
    ]
