"""GEMM + activation: SiLU(x @ W^T + b), the feed-forward projection of many models.

The GEMM dominates; the bias and SiLU are a memory-bound pass over its output that a GEMM
epilogue (cuBLASLt, CUTLASS, Triton) absorbs. TF32 or half-precision GEMMs are faster but fail
the strict fp32 tolerance at this K.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

# cpu-sizes: batch=64, in_features=128, out_features=256
batch = 8192
in_features = 4096
out_features = 4096


class Model(nn.Module):
    """y = silu(x W^T + b)."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(self.linear(x))


def get_inputs():
    return [torch.randn(batch, in_features)]


def get_init_inputs():
    return [in_features, out_features]
