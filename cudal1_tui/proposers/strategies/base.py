"""What every strategy receives and returns."""

from __future__ import annotations

from dataclasses import dataclass, field

from cudal1_tui.problem.model import Inspection, Signature


@dataclass(frozen=True)
class BuiltinCandidate:
    """A real candidate module written by a built-in strategy, evaluated like any other."""

    strategy: str
    code: str
    description: str
    requires: tuple[str, ...] = field(default=())  # e.g. ("c++ compiler",) for inductor on CPU

    @property
    def source(self) -> str:
        return f"builtin:{self.strategy}"


@dataclass(frozen=True)
class Context:
    problem_source: str
    inspection: Inspection
    device: str  # "cpu", "cuda", "cuda:N"

    @property
    def on_cuda(self) -> bool:
        return self.device.startswith("cuda")

    @property
    def init(self) -> Signature:
        return self.inspection.init or Signature()

    @property
    def forward(self) -> Signature:
        return self.inspection.forward or Signature()
