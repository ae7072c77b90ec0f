"""Probe a problem file in an isolated evaluator child (this process never imports torch)."""

from __future__ import annotations

from pathlib import Path

from cudal1_evaluator.launch import probe as launch_probe
from cudal1_evaluator.schema import ProbeJob, ProbeResult
from cudal1_tui.problem.problem_file import read_source


def probe_problem(
    path_or_source: str | Path,
    device: str = "cpu",
    *,
    name: str | None = None,
    seeds: int = 3,
    timing_budget_s: float = 3.0,
    timeout_s: float = 120.0,
    memory_limit_mb: int | None = 16384,
) -> ProbeResult:
    """Run the problem once in a sandboxed child: shapes, parameters, a first time, sensitivity.

    ``path_or_source`` is a Path, a path string (ending in ``.py`` or naming an existing file),
    or the problem's source text. A failing problem comes back as ``ok=False`` with
    ``error_kind`` and a message; an unreadable file raises ProblemError.
    """
    source, default_name = _source_of(path_or_source)
    job = ProbeJob(problem_source=source, device=device, problem_name=name or default_name,
                   seeds=seeds, timing_budget_s=timing_budget_s, timeout_s=timeout_s,
                   memory_limit_mb=memory_limit_mb)
    return launch_probe(job)


def _source_of(path_or_source: str | Path) -> tuple[str, str]:
    if isinstance(path_or_source, Path):
        return read_source(path_or_source), path_or_source.stem
    one_line = "\n" not in path_or_source and len(path_or_source) < 4096
    if one_line and (path_or_source.endswith(".py") or Path(path_or_source).exists()):
        return read_source(path_or_source), Path(path_or_source).stem
    return path_or_source, "problem"
