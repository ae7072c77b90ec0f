"""The static gate: read a candidate (and the C++/CUDA it compiles) before anything runs.

Each rule answers with a ``Finding`` carrying its reason; ``reject`` findings stop the candidate,
``warn`` findings travel with the result. The gate uses tree-sitter queries on the Python module
and on the strings passed to ``load_inline``, so comments and strings never trigger Python rules.

Allowed on purpose: plain PyTorch, ``load_inline`` kernels, Triton, ``torch.compile``, and CUDA
graphs (capture uses a side stream internally and PyTorch's documented warm-up uses one too;
the evaluator synchronises the whole device, so stream use next to graph capture is only
reported). ``torch.backends.cudnn.benchmark = True`` and TF32 switches are reported as warnings:
the evaluator restores global settings before timing the reference.
"""

from __future__ import annotations

from cudal1_tui.analysis import (
    cpp_sources,
    pymodule,
    rules_cuda,
    rules_problem,
    rules_python,
    rules_sandbox,
)
from cudal1_tui.analysis import source_tree as ts
from cudal1_tui.analysis.findings import Finding, dedupe
from cudal1_tui.analysis.parsed_problem import ParsedProblem, parse_problem

__all__ = ["Finding", "ParsedProblem", "check_candidate", "parse_problem", "rejected"]


def check_candidate(candidate_source: str, problem: str | ParsedProblem) -> list[Finding]:
    """Every finding on ``candidate_source``, judged against the problem (text or parsed)."""
    prob = problem if isinstance(problem, ParsedProblem) else parse_problem(problem)
    cand = pymodule.load(candidate_source)
    findings = [*_syntax(cand), *rules_python.check(cand),
                *rules_problem.check(cand, prob)]
    sources = cpp_sources.extract(cand)
    findings += rules_sandbox.check(cand, sources)
    stream_ok = rules_python.uses_cuda_graphs(cand)
    for f in rules_cuda.check(sources, prob.fp32):
        if stream_ok and f.code == "side_stream":
            f = Finding(f.code, f.reason + " (next to CUDA graph capture: reported only)", "warn",
                        f.line)
        findings.append(f)
    return dedupe(findings)


def rejected(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity == "reject"]


def _syntax(cand: pymodule.PyModule) -> list[Finding]:
    if not cand.root.has_error:
        return []
    node = next((n for n in ts.walk(cand.root) if n.type == "ERROR" or n.is_missing), cand.root)
    return [Finding("syntax", "the candidate does not parse; the evaluator will report the "
                    "error", "warn", ts.line(node))]
