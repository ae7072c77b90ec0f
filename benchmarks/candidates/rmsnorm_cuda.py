"""RMSNorm as one CUDA kernel per row: a block reduces the sum of squares, then scales."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>

__global__ void rmsnorm_kernel(const float* __restrict__ x, const float* __restrict__ w,
                               float* __restrict__ y, int hidden, float eps) {
    const float* xr = x + (long)blockIdx.x * hidden;
    float* yr = y + (long)blockIdx.x * hidden;
    float acc = 0.f;
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) { float v = xr[i]; acc += v * v; }
    __shared__ float warp_sums[32];
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffff, acc, off);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) warp_sums[warp] = acc;
    __syncthreads();
    if (warp == 0) {
        int nwarps = blockDim.x >> 5;
        acc = lane < nwarps ? warp_sums[lane] : 0.f;
        for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffff, acc, off);
        if (lane == 0) warp_sums[0] = rsqrtf(acc / hidden + eps);
    }
    __syncthreads();
    float r = warp_sums[0];
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) yr[i] = xr[i] * r * w[i];
}

torch::Tensor rmsnorm(torch::Tensor x, torch::Tensor w, double eps) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat, "fp32 CUDA tensor expected");
    auto xc = x.contiguous();
    auto wc = w.contiguous();
    int hidden = xc.size(-1);
    long rows = xc.numel() / hidden;
    auto y = torch::empty_like(xc);
    rmsnorm_kernel<<<rows, 1024, 0, c10::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), wc.data_ptr<float>(), y.data_ptr<float>(), hidden, (float)eps);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

_ext = load_inline(
    name="rmsnorm_rowblock",
    cpp_sources="torch::Tensor rmsnorm(torch::Tensor x, torch::Tensor w, double eps);",
    cuda_sources=CUDA_SRC,
    functions=["rmsnorm"],
    extra_cuda_cflags=["-O3", "-arch=sm_90"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.rmsnorm(x, self.weight, self.eps)
