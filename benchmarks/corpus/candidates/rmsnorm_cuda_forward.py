"""RMSNorm as one CUDA block per row; the extension is compiled on the first ``forward``
(lazily, from module-level sources), then reused."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>

__global__ void rms_rows_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                float* __restrict__ y, int hidden, float eps) {
    const float* xr = x + (long)blockIdx.x * hidden;
    float* yr = y + (long)blockIdx.x * hidden;
    float acc = 0.f;
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) { float v = xr[i]; acc += v * v; }
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffff, acc, off);
    __shared__ float partial[32];
    __shared__ float scale;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) partial[warp] = acc;
    __syncthreads();
    if (warp == 0) {
        int nwarps = (blockDim.x + 31) >> 5;
        float v = lane < nwarps ? partial[lane] : 0.f;
        for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffff, v, off);
        if (lane == 0) scale = rsqrtf(v / hidden + eps);
    }
    __syncthreads();
    float s = scale;
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) yr[i] = xr[i] * s * w[i];
}

torch::Tensor rms_rows(torch::Tensor x, torch::Tensor w, double eps) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "a float32 CUDA tensor");
    auto xc = x.contiguous();
    auto wc = w.contiguous();
    int hidden = xc.size(-1);
    long rows = xc.numel() / hidden;
    auto y = torch::empty_like(xc);
    if (rows > 0) {
        cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
        rms_rows_kernel<<<rows, 512, 0, stream>>>(xc.data_ptr<float>(), wc.data_ptr<float>(),
                                                  y.data_ptr<float>(), hidden, (float)eps);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return y;
}
"""

CPP_SRC = "torch::Tensor rms_rows(torch::Tensor x, torch::Tensor w, double eps);"


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden))
        self._ext = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self._ext is None:
            self._ext = load_inline(name="corpus_rms_rows_lazy", cpp_sources=CPP_SRC,
                                    cuda_sources=CUDA_SRC, functions=["rms_rows"],
                                    verbose=False)
        return self._ext.rms_rows(x, self.weight, self.eps)
