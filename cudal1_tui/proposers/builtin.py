"""The built-in proposer: the strategies a performance engineer tries first.

Each candidate is a real module (``class ModelNew`` with ``Model``'s signatures)
evaluated like any model candidate and labelled ``builtin:<strategy>``. None is
assumed to help: torch.compile often loses to eager on small problems.
"""

from __future__ import annotations

from cudal1_tui.problem.model import Inspection
from cudal1_tui.proposers.strategies import channels_last, compile, cuda_graph, diag
from cudal1_tui.proposers.strategies.base import BuiltinCandidate, Context

# Algebraic rewrites first: when one applies it is usually the big win.
STRATEGIES = (diag, compile, cuda_graph, channels_last)


def propose(problem_source: str, inspection: Inspection, device: str) -> list[BuiltinCandidate]:
    """Every applicable built-in candidate for this problem on ``device``."""
    if not inspection.ok:
        return []
    ctx = Context(problem_source, inspection, device)
    out: list[BuiltinCandidate] = []
    for strategy in STRATEGIES:
        out.extend(strategy.candidates(ctx))
    return out


def strategy_names(candidates: list[BuiltinCandidate]) -> list[str]:
    return [c.strategy for c in candidates]
