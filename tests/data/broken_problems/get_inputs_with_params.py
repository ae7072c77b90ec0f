import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs(batch_size):
    return [torch.randn(batch_size, 4)]


def get_init_inputs():
    return []
