"""The problem as the gate reads it: parsed once per session, shared by every candidate.

The facts here are about the reference alone (does it compute in float32, does it switch its
own mode); computing them once keeps a session's gate runs from re-walking the problem.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

from tree_sitter import Node

from cudal1_tui.analysis import pymodule
from cudal1_tui.analysis import rules_names as rn
from cudal1_tui.analysis import source_tree as ts


@dataclass(frozen=True)
class ParsedProblem:
    module: pymodule.PyModule
    fp32: bool  # the reference computes in float32: lower precision in a candidate is flagged
    switches_mode: bool  # the reference calls .eval()/.train(False) itself


@lru_cache(maxsize=8)
def parse_problem(problem_source: str) -> ParsedProblem:
    """The problem's tree and facts; cached, so callers holding only the text parse it once."""
    module = pymodule.load(problem_source)
    switches = next(mode_calls(module), None) is not None
    return ParsedProblem(module, fp32=is_fp32(module), switches_mode=switches)


def is_fp32(prob: pymodule.PyModule) -> bool:
    for node in ts.walk(prob.root):
        if node.type == "attribute":
            name = prob.resolve(node) or ""
            attr = ts.text(node.child_by_field_name("attribute"))
            if name in rn.PRECISION_NAMES[:3] or attr in rn.PRECISION_METHODS:
                return False
    return True


def mode_calls(mod: pymodule.PyModule) -> Iterator[Node]:
    """``x.eval()`` and ``x.train(False)`` calls."""
    for node in ts.walk(mod.root):
        func = node.child_by_field_name("function") if node.type == "call" else None
        if func is None or func.type != "attribute":
            continue
        method = ts.text(func.child_by_field_name("attribute"))
        args = ts.text(node.child_by_field_name("arguments")).replace(" ", "")
        if (method == "eval" and args == "()") or (method == "train" and args == "(False)"):
            yield node
