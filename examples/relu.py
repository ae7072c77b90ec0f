"""The simplest problem: element-wise ReLU over a large 2-D tensor.

Eager PyTorch already runs this as a single kernel close to the memory-bandwidth limit, so
it is a control: an honest candidate gains little, and a large "speedup" here points to a
measurement problem. Small and quick, it is also the problem to smoke-test a setup with.
"""

import torch
import torch.nn as nn

# cpu-sizes: rows=128, cols=1024
rows = 16384
cols = 16384


class Model(nn.Module):
    """y = max(x, 0)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
