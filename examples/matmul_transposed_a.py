"""Matmul with a transposed operand: C = Aᵀ @ B, where A is stored (K, M) and B (K, N).

A control problem: cuBLAS already handles the transpose without a copy, and fp32 GEMM is
compute-bound, so honest candidates gain little. It shows what the tolerances catch: a
candidate switching to TF32 or half precision is fast but fails the strict fp32 check.
"""

import torch
import torch.nn as nn

# cpu-sizes: k=256, m=128, n=128
k = 8192
m = 4096
n = 4096


class Model(nn.Module):
    """C = a.T @ b in full fp32."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a.T, b)


def get_inputs():
    return [torch.randn(k, m), torch.randn(k, n)]


def get_init_inputs():
    return []
