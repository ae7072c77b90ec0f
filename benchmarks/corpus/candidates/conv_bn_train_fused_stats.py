"""Conv → BatchNorm (training mode) → ReLU: the batch statistics from one ``var_mean`` and the
normalisation, affine and ReLU folded into a single ``addcmul``-style expression."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        var, mean = torch.var_mean(y, dim=(0, 2, 3), unbiased=False)
        scale = self.bn.weight * torch.rsqrt(var + self.bn.eps)
        shift = self.bn.bias - mean * scale
        return torch.relu(y * scale.view(1, -1, 1, 1) + shift.view(1, -1, 1, 1))
