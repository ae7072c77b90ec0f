"""Model-output shape: autotune between two methods on the first call, keep the winner.

The first call times a half-precision path against plain ``torch.matmul`` and checks the half
path's error; it is too inaccurate for an fp32 problem, so the fp32 method is kept for good.
The half branch (``A.half()``) never runs after the first call: precision must come from what
runs, not from the text (issue 22: 0.25x when the reference was timed at fp16)."""

import time

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.method = None

    def _half(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a.T.half(), b.half()).float()

    def _fp32(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a.T, b)

    def _pick(self, a: torch.Tensor, b: torch.Tensor) -> str:
        best, exact = "fp32", None
        timings = {}
        for name in ("fp32", "half"):
            start = time.perf_counter()
            out = getattr(self, f"_{name}")(a, b)
            if out.is_cuda:
                torch.cuda.synchronize()
            timings[name] = time.perf_counter() - start
            if name == "fp32":
                exact = out
            elif exact is not None:
                err = float((out - exact).abs().max() / exact.abs().max().clamp_min(1e-12))
                if err < 1e-5 and timings["half"] < timings["fp32"]:
                    best = "half"
        return best

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        if self.method is None:
            self.method = self._pick(a, b)
        if self.method == "half":
            return self._half(a, b)
        return self._fp32(a, b)
