"""Online softmax (one block per row, max and sum in one pass) with a try/except that falls
back to PyTorch if the kernel raises. The call leaves out the temperature argument, which the
binding rejects with a TypeError on every call: the fallback is ALWAYS taken.

(Written after the H100 run of 2026-11-26 showed that ``softmax_cuda_fallback_taken``, which
passes the temperature as a 0-d tensor, never falls back: pybind11 converts the tensor with
``__float__``.)"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>
#include <cfloat>

__device__ __forceinline__ void merge(float& m, float& s, float m2, float s2) {
    float mn = fmaxf(m, m2);
    s = (m == -FLT_MAX ? 0.f : s * __expf(m - mn)) + (m2 == -FLT_MAX ? 0.f : s2 * __expf(m2 - mn));
    m = mn;
}

__global__ void softmax_rows_kernel(const float* __restrict__ x, float* __restrict__ y,
                                    int cols, float inv_t) {
    const float* xr = x + (long)blockIdx.x * cols;
    float* yr = y + (long)blockIdx.x * cols;
    float m = -FLT_MAX, s = 0.f;
    for (int i = threadIdx.x; i < cols; i += blockDim.x) merge(m, s, xr[i] * inv_t, 1.f);
    for (int off = 16; off > 0; off >>= 1) {
        float m2 = __shfl_down_sync(0xffffffff, m, off);
        float s2 = __shfl_down_sync(0xffffffff, s, off);
        merge(m, s, m2, s2);
    }
    __shared__ float sm[32], ss[32];
    __shared__ float row_max, row_sum;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) { sm[warp] = m; ss[warp] = s; }
    __syncthreads();
    if (warp == 0) {
        int nwarps = (blockDim.x + 31) >> 5;
        m = lane < nwarps ? sm[lane] : -FLT_MAX;
        s = lane < nwarps ? ss[lane] : 0.f;
        for (int off = 16; off > 0; off >>= 1) {
            float m2 = __shfl_down_sync(0xffffffff, m, off);
            float s2 = __shfl_down_sync(0xffffffff, s, off);
            merge(m, s, m2, s2);
        }
        if (lane == 0) { row_max = m; row_sum = s; }
    }
    __syncthreads();
    float mx = row_max, inv = 1.f / row_sum;
    for (int i = threadIdx.x; i < cols; i += blockDim.x) yr[i] = __expf(xr[i] * inv_t - mx) * inv;
}

torch::Tensor softmax_rows(torch::Tensor x, double temperature) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "a float32 CUDA tensor");
    auto xc = x.contiguous();
    int cols = xc.size(-1);
    long rows = xc.numel() / cols;
    auto y = torch::empty_like(xc);
    if (rows > 0) {
        cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
        softmax_rows_kernel<<<rows, 512, 0, stream>>>(xc.data_ptr<float>(), y.data_ptr<float>(),
                                                     cols, (float)(1.0 / temperature));
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return y;
}
"""

CPP_SRC = "torch::Tensor softmax_rows(torch::Tensor x, double temperature);"

softmax_ext = load_inline(name="corpus_softmax_online_wrong_arity", cpp_sources=CPP_SRC,
                          cuda_sources=CUDA_SRC, functions=["softmax_rows"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, temperature: float):
        super().__init__()
        self.temperature = temperature

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        try:
            return softmax_ext.softmax_rows(x)
        except (RuntimeError, TypeError):
            z = x / self.temperature
            z = z - z.max(dim=-1, keepdim=True).values
            e = torch.exp(z)
            return e / e.sum(dim=-1, keepdim=True)
