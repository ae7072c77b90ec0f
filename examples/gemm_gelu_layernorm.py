"""Fused chain: Linear (GEMM + bias), GELU, then LayerNorm over the output features.

The GEMM dominates; bias, GELU and LayerNorm are three memory-bound passes over its output
that a GEMM epilogue (or a single fused row kernel afterwards) can absorb.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

# cpu-sizes: batch=64, in_features=128, out_features=256
batch = 8192
in_features = 4096
out_features = 4096


class Model(nn.Module):
    """y = LayerNorm(gelu(x @ W^T + b))."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.norm = nn.LayerNorm(out_features)
        nn.init.normal_(self.norm.weight, 1.0, 0.1)
        nn.init.normal_(self.norm.bias, 0.0, 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(F.gelu(self.linear(x)))


def get_inputs():
    return [torch.randn(batch, in_features)]


def get_init_inputs():
    return [in_features, out_features]
