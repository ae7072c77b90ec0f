# Optimized diag_matmul — exported by cudal1-tui 0.0.0+checkout on 2026-11-21T08:57:42+00:00
#
# Use it in place of the original module: `from optimized_diag_matmul import Model`.
#
# How it was measured:
#   speedup            158.67x over eager PyTorch (median 21.52 ms -> 0.1356 ms)
#   device             NVIDIA H200
#   versions           python 3.12.3, torch 2.11.0+cu130, cuda 13.0, triton 3.6.0, ninja 1.13.2, nvcc 13.0.88, gcc 13.3.0
#   tolerance          strict (float64 1e-04, float32 1e-04, float16 1e-02, bfloat16 1e-02); max abs err 0, max rel err 0 over 9 trials
#   reward             10 (clipped_speedup)
#   session            2026-11-21_0855_diag_matmul_d5ad9d
#   record             r002s0-ef95bc (round 2, slot 0, model)
#   measured at        2026-11-21T08:57:42+00:00

"""diag(a) @ B as a row-scaling CUDA kernel: one read of B, one write, float4 vectorised."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>

__global__ void row_scale_kernel(const float* __restrict__ a, const float4* __restrict__ b,
                                 float4* __restrict__ out, long rows, long cols4) {
    long row = blockIdx.y;
    float s = a[row];
    for (long c = blockIdx.x * blockDim.x + threadIdx.x; c < cols4; c += (long)gridDim.x * blockDim.x) {
        float4 v = b[row * cols4 + c];
        v.x *= s; v.y *= s; v.z *= s; v.w *= s;
        out[row * cols4 + c] = v;
    }
}

__global__ void row_scale_scalar(const float* __restrict__ a, const float* __restrict__ b,
                                 float* __restrict__ out, long rows, long cols) {
    long row = blockIdx.y;
    float s = a[row];
    for (long c = blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += (long)gridDim.x * blockDim.x)
        out[row * cols + c] = b[row * cols + c] * s;
}

torch::Tensor diag_matmul(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.is_cuda() && b.is_cuda(), "inputs must be CUDA tensors");
    TORCH_CHECK(a.scalar_type() == torch::kFloat && b.scalar_type() == torch::kFloat, "fp32 only");
    auto ac = a.contiguous();
    auto bc = b.contiguous();
    long rows = bc.size(0), cols = bc.size(1);
    auto out = torch::empty_like(bc);
    auto stream = c10::cuda::getCurrentCUDAStream();
    int threads = 256;
    if (cols % 4 == 0) {
        long cols4 = cols / 4;
        dim3 grid((unsigned)std::min<long>((cols4 + threads - 1) / threads, 64), (unsigned)rows);
        row_scale_kernel<<<grid, threads, 0, stream>>>(
            ac.data_ptr<float>(), reinterpret_cast<const float4*>(bc.data_ptr<float>()),
            reinterpret_cast<float4*>(out.data_ptr<float>()), rows, cols4);
    } else {
        dim3 grid((unsigned)std::min<long>((cols + threads - 1) / threads, 64), (unsigned)rows);
        row_scale_scalar<<<grid, threads, 0, stream>>>(
            ac.data_ptr<float>(), bc.data_ptr<float>(), out.data_ptr<float>(), rows, cols);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

CPP_SRC = "torch::Tensor diag_matmul(torch::Tensor a, torch::Tensor b);"

_ext = load_inline(
    name="diag_matmul_rowscale",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["diag_matmul"],
    extra_cuda_cflags=["-O3", "-arch=sm_90"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return _ext.diag_matmul(a, b)


# --- added by cudal1-tui export: the name and the inputs of the reference ---
Model = ModelNew

import torch
import torch.nn as nn
n = 8192
m = 8192


def get_inputs():
    return [torch.randn(n), torch.randn(n, m)]


def get_init_inputs():
    return []
