"""Sum over the middle dimension as a C++ extension (CPU): for each batch, accumulate rows of
``dim2`` contiguous floats, which the compiler vectorises."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SRC = r"""
#include <torch/extension.h>

torch::Tensor sum_mid(torch::Tensor x) {
    TORCH_CHECK(x.device().is_cpu() && x.dim() == 3 && x.scalar_type() == torch::kFloat32,
                "a 3-D float32 CPU tensor");
    auto xc = x.contiguous();
    const int64_t b = xc.size(0), d1 = xc.size(1), d2 = xc.size(2);
    auto y = torch::zeros({b, d2}, xc.options());
    const float* px = xc.data_ptr<float>();
    float* py = y.data_ptr<float>();
    for (int64_t n = 0; n < b; ++n) {
        float* out = py + n * d2;
        for (int64_t i = 0; i < d1; ++i) {
            const float* row = px + (n * d1 + i) * d2;
            for (int64_t j = 0; j < d2; ++j) out[j] += row[j];
        }
    }
    return y;
}
"""

sum_ext = load_inline(name="corpus_sum_mid_cpu", cpp_sources=CPP_SRC, functions=["sum_mid"],
                      extra_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return sum_ext.sum_mid(x)
