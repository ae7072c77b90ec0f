# Built-in candidate: torch.compile, mode default.
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

    def _reference_init(self):
        super().__init__()

    def _reference_forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.diag(a) @ b

    def __init__(self):
        self._reference_init()
        self._compiled_forward = torch.compile(self._reference_forward)

    def forward(self, a: torch.Tensor, b: torch.Tensor):
        """The reference computation, compiled with torch.compile (mode default)."""
        return self._compiled_forward(a, b)
