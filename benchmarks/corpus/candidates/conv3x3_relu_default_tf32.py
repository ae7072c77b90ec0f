"""A convolution at PyTorch's default precision: the same cuDNN convolution (TF32 on Ampere and
later, as the user's own code runs it) with the ReLU applied in place on the convolution's
fresh output, saving one allocation and one pass."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu_(self.conv(x))
