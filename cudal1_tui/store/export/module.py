"""``module``: the accepted kernel as a file that imports in place of the user's module.

The file is the candidate's code, then ``Model = ModelNew`` and the reference's imports,
sizes, ``get_inputs`` and ``get_init_inputs`` (the sizes the kernel was verified at), headed
by a comment saying how it was measured.
"""

from __future__ import annotations

import ast
import keyword
from pathlib import Path

from cudal1_tui import __version__
from cudal1_tui.errors import ExportError
from cudal1_tui.measurements import candidate_ms, max_errors, reference_ms
from cudal1_tui.records import CandidateRecord
from cudal1_tui.store.export.common import ExportOptions, SessionData
from cudal1_tui.store.naming import now_iso
from cudal1_tui.uncertainty import precision_text

EXTENSION = "py"
HELPERS = ("get_inputs", "get_init_inputs")


def reference_helpers(reference: str) -> str:
    """The reference's top-level imports, simple assignments and input helpers, in order."""
    try:
        tree = ast.parse(reference)
    except SyntaxError as exc:
        raise ExportError(f"the session's reference does not parse: {exc}") from None
    parts: list[str] = []
    for node in tree.body:
        keep = isinstance(node, ast.Import | ast.ImportFrom) or (
            isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets)
        ) or (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)) or (
            isinstance(node, ast.FunctionDef) and node.name in HELPERS)
        segment = ast.get_source_segment(reference, node) if keep else None
        if segment:
            spacing = "\n\n" if isinstance(node, ast.FunctionDef) and parts else ""
            parts.append(spacing + segment)
    names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    missing = [h for h in HELPERS if h not in names]
    if missing:
        raise ExportError(f"the session's reference lacks {', '.join(missing)}")
    return "\n".join(parts)


def assigned_names(source: str) -> set[str]:
    """Names a module assigns at its top level (its sizes, among others)."""
    names: set[str] = set()
    for node in ast.parse(source).body:
        targets = node.targets if isinstance(node, ast.Assign) else (
            [node.target] if isinstance(node, ast.AnnAssign) else [])
        names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def without_assignments(code: str, names: set[str]) -> str:
    """``code`` minus its top-level assignments to ``names``: the reference's sizes (the
    ones the kernel was verified at) are appended later and must be the only ones."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code
    drop: set[int] = set()
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else (
            [node.target] if isinstance(node, ast.AnnAssign) else [])
        if targets and all(isinstance(t, ast.Name) and t.id in names for t in targets):
            drop.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return "\n".join(line for i, line in enumerate(code.splitlines(), 1) if i not in drop)


def check_module_name(name: str) -> None:
    if not name.isidentifier() or keyword.iskeyword(name):
        raise ExportError(f"{name!r} cannot be imported as a Python module name",
                          fix=f"name the file like a module, e.g. -o optimized_{name[:20]}.py "
                          "(letters, digits and _ only, not starting with a digit)")


def _fmt(value: float | None, unit: str = "") -> str:
    return f"{value:.4g}{unit}" if value is not None else "n/a"


def _pairs(mapping: object, sep: str = " ") -> str:
    if isinstance(mapping, dict) and mapping:
        return ", ".join(f"{k}{sep}{v}" for k, v in mapping.items())
    return "unknown"


def _tolerance(tolerance: object) -> str:
    """``strict (float32 1e-04, float16 1e-02)`` from the evaluator's description."""
    if not isinstance(tolerance, dict) or "preset" not in tolerance:
        return _pairs(tolerance, "=")
    by_dtype = tolerance.get("by_dtype")
    limits = ", ".join(
        f"{name} {tol['atol']:.0e}" if isinstance(tol.get("atol"), float) else name
        for name, tol in (by_dtype.items() if isinstance(by_dtype, dict) else [])
        if isinstance(tol, dict))
    return f"{tolerance['preset']} ({limits})" if limits else str(tolerance["preset"])


def header(data: SessionData, record: CandidateRecord, module_name: str) -> str:
    result = record.result
    device = result.device or data.meta.device
    versions = result.versions or data.meta.versions
    tolerance = result.tolerance
    abs_err, rel_err = max_errors(result)
    speedup = precision_text(result, record.speedup).replace("×", "x")
    lines = [
        f"Optimized {data.problem_name} — exported by cudal1-tui {__version__} on {now_iso()}",
        "",
        f"Use it in place of the original module: `from {module_name} import Model`.",
        "",
        "How it was measured:",
        f"  speedup            {speedup} over eager PyTorch "
        f"(median {_fmt(reference_ms(result), ' ms')} -> {_fmt(candidate_ms(result), ' ms')})",
        f"  device             {device.get('name') or _pairs(device)}",
        f"  versions           {_pairs(versions)}",
        f"  tolerance          {_tolerance(tolerance)}; "
        f"max abs err {abs_err:.3g}, max rel err {rel_err:.3g} over "
        f"{len(result.trials)} trials",
        f"  reward             {record.reward:.4g} ({record.reward_formula})",
        f"  session            {data.session_id}",
        f"  record             {record.record_id} (round {record.round}, slot {record.slot}, "
        f"{record.source})",
        f"  measured at        {record.finished_at or 'unknown'}",
    ]
    return "\n".join(f"# {line}".rstrip() for line in lines)


def render(data: SessionData, record: CandidateRecord, module_name: str) -> str:
    helpers = reference_helpers(data.reference_source)
    code = without_assignments(record.code, assigned_names(helpers))
    return (f"{header(data, record, module_name)}\n\n{code.rstrip()}\n\n\n"
            "# --- added by cudal1-tui export: the name and the inputs of the reference ---\n"
            f"Model = ModelNew\n\n{helpers}\n")


def write(sessions: list[SessionData], options: ExportOptions, path: Path) -> int:
    if len(sessions) != 1:
        raise ExportError("the module format exports one session at a time",
                          fix="pass a single SESSION")
    data = sessions[0]
    if data.accepted is None:
        raise ExportError(f"session {data.session_id} has no accepted candidate",
                          fix="accept one in the app (key `a`) and export again")
    check_module_name(path.stem)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(data, data.accepted, path.stem), encoding="utf-8")
    return 1
