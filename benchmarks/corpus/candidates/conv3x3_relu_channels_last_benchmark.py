"""Settings at import, as model output often writes them: ``cudnn.benchmark`` on and the
convolution in channels_last (NHWC), converted back to contiguous for the caller."""

import torch
import torch.nn as nn

torch.backends.cudnn.benchmark = True


class ModelNew(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)
        self.conv = self.conv.to(memory_format=torch.channels_last)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x.contiguous(memory_format=torch.channels_last))
        return torch.relu(y).contiguous()
