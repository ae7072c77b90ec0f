"""ReLU applied in place on the input tensor: no allocation, but the caller's input is
overwritten."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu_(x)
