import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        y = x @ x
        return y


def get_inputs():
    return [torch.randn(8, 16)]


def get_init_inputs():
    return []
