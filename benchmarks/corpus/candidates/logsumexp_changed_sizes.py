"""torch.logsumexp, plus module sizes and a get_inputs edited down to something small (a model
"making the benchmark easier"). The evaluator owns sizes and inputs, so the edit is inert."""

import torch
import torch.nn as nn

rows = 64
cols = 64


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.logsumexp(x, dim=1)


def get_inputs():
    return [torch.randn(rows, cols) * 4.0]


def get_init_inputs():
    return []
