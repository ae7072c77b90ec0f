"""Reduction: row-wise log-sum-exp, written out in its numerically stable two-pass form.

out[i] = max_j x[i, j] + log(sum_j exp(x[i, j] - max_j x[i, j]))

The reference reads every row three times (max, exp-and-sum, log); an online log-sum-exp
reads it once, so a single fused reduction kernel wins on this memory-bound problem.
"""

import torch
import torch.nn as nn

# cpu-sizes: rows=128, cols=1024
rows = 16384
cols = 16384


class Model(nn.Module):
    """Stable log-sum-exp over the last dimension of a (rows, cols) tensor."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        peak = x.max(dim=1, keepdim=True).values
        shifted = torch.exp(x - peak)
        return peak.squeeze(1) + torch.log(shifted.sum(dim=1))


def get_inputs():
    return [torch.randn(rows, cols) * 4.0]


def get_init_inputs():
    return []
