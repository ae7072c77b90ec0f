"""softmax(x / T) through ``torch.softmax``; the model copied the problem's input functions
(moved to the GPU) into its answer, as models often do."""

import torch
import torch.nn as nn

rows = 16384
cols = 16384


class ModelNew(nn.Module):
    def __init__(self, temperature: float):
        super().__init__()
        self.temperature = temperature

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x / self.temperature, dim=-1)


def get_inputs():
    return [torch.randn(rows, cols).cuda()]


def get_init_inputs():
    return [0.7]
