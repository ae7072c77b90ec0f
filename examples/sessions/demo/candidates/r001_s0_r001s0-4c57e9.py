# Built-in candidate: products with a diagonal matrix rewritten as broadcast multiplies.
"""Structured matmul: C = diag(a) @ B, a dense matmul against a diagonal matrix.

The reference materialises an n×n diagonal matrix and runs an O(n²m) GEMM. Row i of the
result is just a[i] * B[i, :], so the right rewrite (a broadcast multiply, O(nm), one read
of B) is about two orders of magnitude faster: the win comes from the algorithm, not the
kernel.
"""

import torch
import torch.nn as nn

# cpu-sizes: n=256, m=256
n = 256
m = 256


class ModelNew(nn.Module):
    """Scales row i of B by a[i] via an explicit diagonal matrix product."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a.unsqueeze(-1) * b
