import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2


def get_inputs():
    return [torch.arange(64, dtype=torch.float32).reshape(8, 8)]


def get_init_inputs():
    return []
