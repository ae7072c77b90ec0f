"""Normalisation: RMSNorm over the hidden dimension of (tokens, hidden) activations.

y = x / sqrt(mean(x^2, dim=-1) + eps) * weight

Written with separate square, mean, rsqrt and multiply operators, each a kernel of its own;
a fused kernel keeps a row in registers or shared memory and touches global memory twice.
"""

import torch
import torch.nn as nn

# cpu-sizes: tokens=256, hidden=512
tokens = 16384
hidden = 8192


class Model(nn.Module):
    """RMSNorm with a learned per-channel scale (initialised away from 1 so it matters)."""

    def __init__(self, hidden: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean_square = x.pow(2).mean(dim=-1, keepdim=True)
        return x * torch.rsqrt(mean_square + self.eps) * self.weight


def get_inputs():
    return [torch.randn(tokens, hidden)]


def get_init_inputs():
    return [hidden, 1e-6]
