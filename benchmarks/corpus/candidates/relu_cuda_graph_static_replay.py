"""Model-output shape: capture the op in a CUDA graph on the first call, then copy each input
into the static input and replay, returning the graph's static output buffer (no clone).

Each output is right when read at once, but the next call overwrites it: a caller holding two
results gets garbage. The speedup is measured and shown; the default reward policy
(static_outputs: zero) rejects it."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.graph = None
        self.static_in = None
        self.static_out = None

    def _capture(self, x: torch.Tensor) -> None:
        self.static_in = x.clone()
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            torch.relu(self.static_in)  # warm-up outside the capture
        torch.cuda.current_stream().wait_stream(stream)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.static_out = torch.relu(self.static_in)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not x.is_cuda:
            return torch.relu(x)
        if self.graph is None or self.static_in.shape != x.shape:
            self._capture(x)
        self.static_in.copy_(x)
        self.graph.replay()
        return self.static_out
