"""Reduction over the middle dimension: sum of a (batch, dim1, dim2) tensor over dim1.

A strided reduction (KernelBench level 1 style): each output element sums ``dim1`` values
``dim2`` apart, so a good kernel reads coalesced rows and accumulates per column.
"""

import torch
import torch.nn as nn

# cpu-sizes: batch=8, dim1=64, dim2=128
batch = 32
dim1 = 2048
dim2 = 2048


class Model(nn.Module):
    """y[b, j] = sum_i x[b, i, j]."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=1)


def get_inputs():
    return [torch.randn(batch, dim1, dim2)]


def get_init_inputs():
    return []
