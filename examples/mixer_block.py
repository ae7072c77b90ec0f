"""A small whole model: one MLP-Mixer block (token mixing, then channel mixing).

x: (batch, tokens, channels)
x = x + TokenMLP(LayerNorm(x)ᵀ)ᵀ      mixes information across tokens
x = x + ChannelMLP(LayerNorm(x))       mixes information across channels

Several GEMMs with transposes, two LayerNorms, GELUs and residual adds: room for fused
epilogues, avoiding the transpose copies, and CUDA graphs to cut launch overhead.
"""

import torch
import torch.nn as nn

# cpu-sizes: batch=4, tokens=16, channels=32, token_hidden=32, channel_hidden=64
batch = 128
tokens = 256
channels = 512
token_hidden = 512
channel_hidden = 2048


class Model(nn.Module):
    """One MLP-Mixer block with pre-norm residual token and channel MLPs."""

    def __init__(self, tokens: int, channels: int, token_hidden: int, channel_hidden: int):
        super().__init__()
        self.norm1 = nn.LayerNorm(channels)
        self.token_mlp = nn.Sequential(
            nn.Linear(tokens, token_hidden), nn.GELU(), nn.Linear(token_hidden, tokens)
        )
        self.norm2 = nn.LayerNorm(channels)
        self.channel_mlp = nn.Sequential(
            nn.Linear(channels, channel_hidden), nn.GELU(), nn.Linear(channel_hidden, channels)
        )
        for norm in (self.norm1, self.norm2):
            nn.init.normal_(norm.weight, 1.0, 0.1)
            nn.init.normal_(norm.bias, 0.0, 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mixed = self.token_mlp(self.norm1(x).transpose(1, 2)).transpose(1, 2)
        x = x + mixed
        return x + self.channel_mlp(self.norm2(x))


def get_inputs():
    return [torch.randn(batch, tokens, channels)]


def get_init_inputs():
    return [tokens, channels, token_hidden, channel_hidden]
