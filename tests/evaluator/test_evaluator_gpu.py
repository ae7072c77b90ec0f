"""The evaluator on a real GPU: CUDA events, L2 flush, load_inline CUDA builds, profiler,
strict re-evaluation of a 60x rewrite, a cached fake, an illegal memory access."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from evaluator_cases import job

from cudal1_evaluator.common.timing import Clock
from cudal1_evaluator.launch import evaluate

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

DIAG_GPU = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.diag(A) @ B


N = 4096
M = 4096


def get_inputs():
    return [torch.randn(N), torch.randn(N, M)]


def get_init_inputs():
    return []
'''

BROADCAST = '''
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return A.unsqueeze(1) * B
'''

CACHED_FAKE = '''
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.cache = {}

    def forward(self, A, B):
        key = (A.data_ptr(), B.data_ptr(), tuple(B.shape))
        if key not in self.cache:
            self.cache[key] = torch.diag(A) @ B
        return self.cache[key]
'''

KERNEL = r"""
__global__ void scale_rows_kernel(const float* a, const float* b, float* out,
                                  long long n, long long m, long long shift) {
    long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (idx < n * m) out[idx + shift] = a[idx / m] * b[idx];
}

torch::Tensor scale_rows(torch::Tensor a, torch::Tensor b) {
    auto A = a.contiguous();
    auto B = b.contiguous();
    auto out = torch::empty_like(B);
    long long n = B.size(0), m = B.size(1);
    int threads = 256;
    long long blocks = (n * m + threads - 1) / threads;
    scale_rows_kernel<<<blocks, threads>>>(A.data_ptr<float>(), B.data_ptr<float>(),
                                           out.data_ptr<float>(), n, m, SHIFT);
    return out;
}
"""

CUDA_CANDIDATE = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

ext = load_inline(
    name="scale_rows_cuda",
    cpp_sources="torch::Tensor scale_rows(torch::Tensor a, torch::Tensor b);",
    cuda_sources=KERNEL_SOURCE,
    functions=["scale_rows"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return ext.scale_rows(A, B)
'''


def cuda_candidate(shift: str) -> str:
    kernel = KERNEL.replace("SHIFT", shift)
    return CUDA_CANDIDATE.replace("KERNEL_SOURCE", f"r'''{kernel}'''")


def gpu_job(candidate: str, build_dir: Path, **fields: object):  # type: ignore[no-untyped-def]
    settings: dict[str, object] = {
        "device": "cuda", "timing_budget_s": 2.0, "correctness_trials": 3, "min_samples": 20,
        "max_samples": 200, "stable_rel_ci": 0.01, "timeout_s": 500.0, "memory_limit_mb": 32768}
    return job(DIAG_GPU, candidate, build_dir, **{**settings, **fields})


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gpu-builds")


def test_real_60x_rewrite_passes_strict_reevaluation(build_dir: Path) -> None:
    result = evaluate(gpu_job(BROADCAST, build_dir))
    print(result.message, {k: (v.median_ms, v.spread, v.n) for k, v in result.timing.items()})
    assert result.status == "ok", result.message
    assert result.speedup is not None and result.speedup > 10
    assert result.strict_reevaluation and len(result.trials) == 9
    assert result.timing["candidate"].clock == "trusted_window"
    assert result.device["type"] == "cuda" and result.device["capability"]
    print(result.device, result.versions)
    assert result.device["driver"] and result.versions["nvcc"] and result.versions["cuda"]
    assert result.profile is not None and result.profile["kernels"]


@pytest.mark.xfail(strict=False, reason="per-call release: a call of tens of microseconds "
                   "pays its launch and hand-over a call (docs/security.md, Known limits, "
                   "'Per-call release costs each call a round trip')")
def test_fast_kernel_agrees_with_do_bench(build_dir: Path) -> None:
    """Our median for a 45 µs kernel within 10 % of triton's do_bench of the same op."""
    result = evaluate(gpu_job(BROADCAST, build_dir, profile=False))
    assert result.status == "ok", result.message
    triton_testing = pytest.importorskip("triton.testing")
    a, b = torch.randn(4096, device="cuda"), torch.randn(4096, 4096, device="cuda")
    bench = float(triton_testing.do_bench(lambda: a.unsqueeze(1) * b, return_mode="median"))
    ours = result.timing["candidate"].median_ms
    print(f"candidate median {ours:.4f} ms, do_bench of the same op {bench:.4f} ms")
    assert abs(ours - bench) / bench < 0.1


def test_cached_fake_does_not_pass(build_dir: Path) -> None:
    result = evaluate(gpu_job(CACHED_FAKE, build_dir))
    print(result.status, result.message, [f.code for f in result.flags])
    assert result.status != "ok" and result.reward == 0.0


def test_cuda_extension_candidate_is_ok_and_its_kernel_is_profiled(build_dir: Path) -> None:
    first = evaluate(gpu_job(cuda_candidate("0"), build_dir))
    print(first.message, first.compile_time_s, first.profile)
    assert first.status == "ok", first.message + first.compile_log
    assert first.profile is not None and first.profile["candidate_kernel_share"] > 0.9
    assert "scale_rows_kernel" in first.profile["own_kernel_names"]
    again = evaluate(gpu_job(cuda_candidate("0"), build_dir))
    print("cached re-evaluation", again.compile_time_s, again.wall_time_s)
    assert again.build_cached and again.compile_time_s < 5


def test_illegal_memory_access_is_a_runtime_error(build_dir: Path) -> None:
    result = evaluate(gpu_job(cuda_candidate("(1LL << 40)"), build_dir))
    print(result.status, result.message)
    assert result.status == "runtime_error"
    assert "illegal memory access" in result.message or "SIG" in result.message


ONE_GPU_SEEN = r'''
import sys

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# Native code, as a candidate's extension would run it (the Python guard sees none of it):
# which /dev/nvidiaN nodes open, and what a process started without CUDA_VISIBLE_DEVICES sees.
_SOURCE = """
#include <torch/extension.h>
#include <cstdio>
#include <fcntl.h>
#include <unistd.h>

std::vector<int64_t> nodes_that_open() {
    std::vector<int64_t> opened;
    for (int n = 0; n < 64; ++n) {
        int fd = open(("/dev/nvidia" + std::to_string(n)).c_str(), O_RDWR);
        if (fd >= 0) { opened.push_back(n); close(fd); }
    }
    return opened;
}

std::string output_of(const std::string& command) {
    std::string out;
    FILE* pipe = popen(command.c_str(), "r");
    if (!pipe) return "popen failed";
    char buf[256];
    while (fgets(buf, sizeof buf, pipe)) out += buf;
    pclose(pipe);
    return out;
}
"""
_ext = load_inline(name="one_gpu_seen", cpp_sources=[_SOURCE],
                   functions=["nodes_that_open", "output_of"], verbose=False)
_CHILD = _ext.output_of("env -u CUDA_VISIBLE_DEVICES " + sys.executable +
                        " -c 'import torch; print(torch.cuda.device_count())' 2>&1")
SEEN = (torch.cuda.device_count(), len(_ext.nodes_that_open()), _CHILD.strip()[-300:])
# the child's count: 1, or no number at all where no process could be started there
if SEEN[:2] != (1, 1) or (SEEN[2].isdigit() and SEEN[2] != "1"):
    raise RuntimeError(f"GPUs seen here, nodes that open, GPUs a child without "
                       f"CUDA_VISIBLE_DEVICES sees: {SEEN}")


class ModelNew(nn.Module):
    def forward(self, A, B):
        return A.unsqueeze(1) * B
'''


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs a host of two GPUs")
def test_a_candidate_on_the_second_gpu_sees_that_gpu_alone(build_dir: Path) -> None:
    """On a host of several GPUs a candidate's process, and a process its native code starts
    without ``CUDA_VISIBLE_DEVICES``, see one GPU: the job's (round 22, ``isolation.gpu_view``);
    of the host's ``/dev/nvidiaN`` nodes, one opens. (The Python guard refuses a process started
    from Python: native code, which it cannot see, is what this asks about.)"""
    result = evaluate(gpu_job(ONE_GPU_SEEN, build_dir, device="cuda:1"))
    print(result.status, result.message, [(f.code, f.reason) for f in result.flags])
    assert result.status == "ok", result.message
    assert result.speedup is not None and result.speedup > 10


def _median_ms(clock: Clock, fn: Callable[[], torch.Tensor], n: int = 30) -> float:
    times: list[float] = []
    for _ in range(n):
        times.append(clock.time_call(fn, flush=True)[0])
    return sorted(times)[n // 2]


def test_clock_counts_side_stream_work_and_agrees_with_do_bench() -> None:
    triton_testing = pytest.importorskip("triton.testing")
    device = torch.device("cuda")
    clock = Clock(device)
    a = torch.randn(4096, 4096, device=device)
    v = torch.randn(4096, device=device)
    side = torch.cuda.Stream()  # type: ignore[no-untyped-call]

    def on_main() -> torch.Tensor:
        return a @ a

    def on_side() -> torch.Tensor:
        with torch.cuda.stream(side):
            return a @ a

    main_ms, side_ms = _median_ms(clock, on_main), _median_ms(clock, on_side)
    print(f"matmul {main_ms:.4f} ms on the main stream, {side_ms:.4f} ms on a side stream")
    assert clock.last_late and side_ms > 0.8 * main_ms

    def broadcast() -> torch.Tensor:
        return v[:, None] * a

    ours = _median_ms(clock, broadcast, 100)
    bench = float(triton_testing.do_bench(broadcast, warmup=25, rep=200, return_mode="median"))
    print(f"broadcast: ours {ours:.4f} ms, do_bench {bench:.4f} ms")
    assert abs(ours - bench) / bench < 0.05


def _busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_head_start_hides_launch_cost_but_not_host_work() -> None:
    """0.1 ms of host work before a 2048² matmul is hidden by the head start; 2 ms of host work
    before a tiny kernel is not (the GPU waits for it inside the timed region)."""
    device = torch.device("cuda")
    a = torch.randn(2048, 2048, device=device)
    v = torch.randn(1024, device=device)
    clock, plain = Clock(device), Clock(device, hold_ms=0.0)

    def kernel_only() -> torch.Tensor:
        return a @ a

    def launch_then_kernel() -> torch.Tensor:
        _busy(1e-4)
        return a @ a

    def host_heavy() -> torch.Tensor:
        _busy(2e-3)
        return v * 2

    base = _median_ms(clock, kernel_only)
    hidden = _median_ms(clock, launch_then_kernel)
    exposed = _median_ms(plain, launch_then_kernel)
    heavy = _median_ms(clock, host_heavy)
    print(f"kernel {base:.4f} ms; +0.1 ms host: {hidden:.4f} ms with the head start, "
          f"{exposed:.4f} ms without; 2 ms host + tiny kernel: {heavy:.4f} ms")
    assert abs(hidden - base) < 0.03 * base + 0.01
    assert exposed > hidden + 0.03
    assert heavy > 1.5


def test_the_profiler_pass_runs_in_its_own_warm_child(build_dir: Path) -> None:
    from cudal1_evaluator.parent import warm

    warm.discard_all()
    first = evaluate(gpu_job(cuda_candidate("0"), build_dir, strict_threshold=1e9))
    assert first.status == "ok", first.message
    assert "profile" in warm.idle_modes(), warm.idle_modes()  # started after it
    time.sleep(10.0)  # the model writing the next candidate: the profile child starts CUPTI
    again = evaluate(gpu_job(cuda_candidate("0"), build_dir, strict_threshold=1e9))
    print("with the profile child:", again.wall_time_s, "s;", again.profile)
    assert again.status == "ok", again.message
    assert again.profile is not None and again.profile["candidate_kernel_share"] > 0.9
    assert again.timing["candidate"].median_ms > 0
