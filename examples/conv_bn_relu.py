"""Conv → BatchNorm → ReLU, the classic CNN block, with BatchNorm in training mode.

As in KernelBench, the module is used as constructed (training mode): BatchNorm normalises
with the statistics of the current batch, not its running averages. Folding BatchNorm into
the convolution's weights is only valid in eval mode, so a candidate that folds (or calls
``self.eval()``) computes something else here; fusing the batch-statistics pass and the ReLU
after a cuDNN convolution is the honest win.
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
    """y = relu(batchnorm(conv3x3(x))), batch statistics."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(out_channels)
        nn.init.normal_(self.bn.weight, 1.0, 0.1)
        nn.init.normal_(self.bn.bias, 0.0, 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(self.conv(x)))


def get_inputs():
    return [torch.randn(batch, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
