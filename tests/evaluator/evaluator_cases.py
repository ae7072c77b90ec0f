"""Small KernelBench-format problems and candidates for the evaluator tests (CPU-sized)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from cudal1_evaluator.schema import Job

DIAG_PROBLEM = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    """diag(A) @ B: materialises an N x N matrix."""

    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.diag(A) @ B


N = 1024
M = 256


def get_inputs():
    return [torch.randn(N), torch.randn(N, M)]


def get_init_inputs():
    return []
'''

DIAG_FAST = '''
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return A[:, None] * B
'''

LINEAR_PROBLEM = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.fc = nn.Linear(d_in, d_out)

    def forward(self, x):
        return torch.relu(self.fc(x))


batch = 64
d_in = 128
d_out = 96


def get_inputs():
    return [torch.randn(batch, d_in)]


def get_init_inputs():
    return [d_in, d_out]
'''

# Honest: the same maths, written differently; weights come from the reference.
LINEAR_HONEST = '''
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.fc = nn.Linear(d_in, d_out)

    def forward(self, x):
        return torch.clamp_min(torch.addmm(self.fc.bias, x, self.fc.weight.t()), 0.0)
'''


def linear_candidate(forward_body: str, header: str = "") -> str:
    """A ModelNew for LINEAR_PROBLEM with the given forward body (8-space indented)."""
    return f'''
import os
import signal
import torch
import torch.nn as nn
{header}

class ModelNew(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.fc = nn.Linear(d_in, d_out)

    def forward(self, x):
{forward_body}
'''


def job(problem: str, candidate: str, build_dir: Path | None = None, **fields: object) -> Job:
    """A test-sized job: 2 trials, ~1 s of timing, short timeout."""
    base = Job(
        problem_source=problem,
        candidate_source=candidate,
        device="cpu",
        correctness_trials=2,
        timing_budget_s=0.5,
        warmup=1,
        min_samples=5,
        max_samples=60,
        stable_rel_ci=0.05,
        timeout_s=120.0,
        memory_limit_mb=6144,
        build_dir=str(build_dir) if build_dir else None,
    )
    return replace(base, **fields)  # type: ignore[arg-type]


def until(check: Callable[[], bool], timeout_s: float = 30.0) -> bool:
    """Poll ``check`` until it holds (True, at once) or ``timeout_s`` passes (False): a signal
    takes effect when its task next runs, which on a loaded host (this suite under ``nice``,
    beside other jobs, warm children importing torch) can be seconds away."""
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True
