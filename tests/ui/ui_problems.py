"""A CPU-sized problem and a model reply for it, for tests driven by the real engine."""

from __future__ import annotations

from pathlib import Path

PROBLEM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x) * 2.0


def get_inputs():
    return [torch.randn(128, 128)]


def get_init_inputs():
    return []
'''

CANDIDATE = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.clamp_min(x, 0.0).mul_(2.0)
'''

REPLY = (
    "## Performance Analysis\nReLU then a scale walks the tensor twice.\n\n"
    "## Algorithm Design\nClamp, then scale in place: one temporary instead of two.\n\n"
    f"## Code Implementation\n```python\n{CANDIDATE}```\n"
)
REASONING = "Element-wise chain; fuse the scale into the clamp's output buffer."


def write_problem(directory: Path, name: str = "relu_scale.py") -> Path:
    path = directory / name
    path.write_text(PROBLEM, encoding="utf-8")
    return path
