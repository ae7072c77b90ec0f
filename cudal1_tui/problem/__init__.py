"""Problem files: static inspection (tree-sitter), sizes, and the probe client (no torch here)."""

from cudal1_tui.problem.contract import CONTRACT
from cudal1_tui.problem.inspect import inspect_source
from cudal1_tui.problem.model import (
    ClassSignature,
    Inspection,
    Issue,
    Param,
    Signature,
    SizeConstant,
)
from cudal1_tui.problem.probing import probe_problem
from cudal1_tui.problem.problem_file import LoadedProblem, load_problem, read_source
from cudal1_tui.problem.sizing import cpu_sizes, shrink_for_cpu, size_constants, with_sizes

__all__ = [
    "CONTRACT",
    "ClassSignature",
    "Inspection",
    "Issue",
    "LoadedProblem",
    "Param",
    "Signature",
    "SizeConstant",
    "cpu_sizes",
    "inspect_source",
    "load_problem",
    "probe_problem",
    "read_source",
    "shrink_for_cpu",
    "size_constants",
    "with_sizes",
]
