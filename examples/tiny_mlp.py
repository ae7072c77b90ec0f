"""A small whole model: a three-layer MLP (Linear → ReLU → Linear → ReLU → Linear).

Launch-bound at small batch and GEMM-bound at large: CUDA graphs, fused bias + ReLU epilogues
(``addmm``), or one persistent kernel are the usual rewrites.
"""

import torch
import torch.nn as nn

# cpu-sizes: batch=32, in_features=64, hidden=128, out_features=32
batch = 4096
in_features = 1024
hidden = 2048
out_features = 1024


class Model(nn.Module):
    """y = W3 relu(W2 relu(W1 x + b1) + b2) + b3."""

    def __init__(self, in_features: int, hidden: int, out_features: int):
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.fc1(x))
        x = torch.relu(self.fc2(x))
        return self.fc3(x)


def get_inputs():
    return [torch.randn(batch, in_features)]


def get_init_inputs():
    return [in_features, hidden, out_features]
