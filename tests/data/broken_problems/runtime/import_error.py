import torch
import torch.nn as nn
import not_a_real_package_xyz


class Model(nn.Module):
    def forward(self, x):
        return x


def get_inputs():
    return [torch.randn(8, 16)]


def get_init_inputs():
    return []
