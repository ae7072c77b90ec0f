"""Fused chain: 3×3 Conv2d, an extra per-channel bias, ReLU, then GroupNorm.

The convolution itself belongs to cuDNN; the win is in what follows it: bias, ReLU and
the GroupNorm statistics and affine step can be fused into one or two passes over the
conv output instead of four or five (and channels-last layouts may speed up the conv).
"""

import torch
import torch.nn as nn

# cpu-sizes: batch=2, in_channels=8, out_channels=16, height=16, width=16, groups=4
batch = 64
in_channels = 64
out_channels = 128
height = 128
width = 128
kernel_size = 3
groups = 8


class Model(nn.Module):
    """conv3x3 → + bias → relu → GroupNorm(groups, out_channels)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, groups: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.bias = nn.Parameter(0.02 * torch.randn(out_channels, 1, 1))
        self.norm = nn.GroupNorm(groups, out_channels)
        # non-trivial affine parameters, so a candidate that skips them is caught
        nn.init.normal_(self.norm.weight, 1.0, 0.1)
        nn.init.normal_(self.norm.bias, 0.0, 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        y = torch.relu(y + self.bias)
        return self.norm(y)


def get_inputs():
    return [torch.randn(batch, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, groups]
