"""ReLU with a warm-up: the first calls time two equivalent methods, later calls use the
faster one (a call counter and a warm-up branch; every branch computes the full answer)."""

import time

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0
        self.costs = {"relu": 0.0, "clamp": 0.0}
        self.choice = ""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.choice:
            return torch.relu(x) if self.choice == "relu" else torch.clamp_min(x, 0.0)
        self.calls += 1
        name = "relu" if self.calls % 2 else "clamp"
        started = time.perf_counter()
        y = torch.relu(x) if name == "relu" else torch.clamp_min(x, 0.0)
        self.costs[name] += time.perf_counter() - started
        if self.calls == 6:
            self.choice = min(self.costs, key=self.costs.__getitem__)
        return y
