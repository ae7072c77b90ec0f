"""A microsecond problem: y = 2x + 1 on 4096 floats (one tiny element-wise kernel per op).

Launch and hand-off costs dominate: the reference is ~7 us of GPU time, so a harness's fixed
costs per call decide what the speedup reads (issue 22)."""

import torch
import torch.nn as nn

# cpu-sizes: size=4096
size = 4096


class Model(nn.Module):
    """y = x * 2 + 1 (two kernels)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2.0 + 1.0


def get_inputs():
    return [torch.randn(size)]


def get_init_inputs():
    return []
