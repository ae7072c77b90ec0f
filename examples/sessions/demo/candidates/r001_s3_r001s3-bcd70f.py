import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        # diag(a) @ b scales row i of b by a[i]: a broadcast multiply, no n x n matrix.
        return a.unsqueeze(1) * b
