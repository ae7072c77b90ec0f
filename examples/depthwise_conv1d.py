"""Depthwise 1-D convolution (one filter per channel, kernel 7, same padding) plus SiLU.

The short conv found in Mamba- and ConvNeXt-style blocks. The work is tiny per element,
so the problem is memory-bound: eager runs the conv and the SiLU as separate passes, while
a direct kernel that keeps the 7 taps in registers and fuses the SiLU reads x once and
writes y once.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

# cpu-sizes: batch=2, channels=64, length=512
batch = 32
channels = 1024
length = 8192
kernel_size = 7


class Model(nn.Module):
    """y = silu(depthwise_conv1d(x)) with groups == channels."""

    def __init__(self, channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv1d(
            channels, channels, kernel_size, padding=kernel_size // 2, groups=channels
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(self.conv(x))


def get_inputs():
    return [torch.randn(batch, channels, length)]


def get_init_inputs():
    return [channels, kernel_size]
