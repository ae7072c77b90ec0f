"""A 3x3 convolution and ReLU in fp32, as a user's code runs it: with PyTorch's defaults, cuDNN
runs the convolution in TF32 on Ampere and later (issue 22: the baseline at PyTorch's
defaults, not strict fp32)."""

import torch
import torch.nn as nn

# cpu-sizes: batch=2, channels=8, size=16
batch = 32
channels = 64
size = 56


class Model(nn.Module):
    """y = relu(conv3x3(x))."""

    def __init__(self, channels: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x))


def get_inputs():
    return [torch.randn(batch, channels, size, size)]


def get_init_inputs():
    return [channels]
