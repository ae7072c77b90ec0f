import torch
from mymodels import Model


def get_inputs():
    return [torch.randn(4, 4)]


def get_init_inputs():
    return []
