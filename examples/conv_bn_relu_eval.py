"""Conv → BatchNorm → ReLU for inference: BatchNorm in eval mode with running statistics.

The module puts itself in eval mode, so BatchNorm is a fixed per-channel affine map and can be
folded into the convolution's weights and bias (one cuDNN call plus a ReLU, or a fused
epilogue). Running statistics start away from 0/1 so that a fold that ignores them fails.
"""

import torch
import torch.nn as nn

# cpu-sizes: batch=2, in_channels=4, out_channels=8, height=16, width=16
batch = 32
in_channels = 64
out_channels = 128
height = 56
width = 56


class Model(nn.Module):
    """y = relu(batchnorm_eval(conv3x3(x))), running statistics."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(out_channels)
        nn.init.normal_(self.bn.weight, 1.0, 0.1)
        nn.init.normal_(self.bn.bias, 0.0, 0.1)
        with torch.no_grad():
            self.bn.running_mean.normal_(0.0, 0.5)
            self.bn.running_var.uniform_(0.5, 2.0)
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(self.conv(x)))


def get_inputs():
    return [torch.randn(batch, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
