"""``module``: the accepted kernel as a file that imports in place of the user's module.

The file is the candidate's code, then ``Model = ModelNew`` and the reference's imports,
sizes, ``get_inputs`` and ``get_init_inputs``, headed by a comment saying how it was
measured: the speedup as the ratio of its two times, the sizes and the device it was
measured at. The sizes are the measured ones (a session run on a CPU measured at the file's
``# cpu-sizes:``) unless ``ExportOptions.module_sizes`` is ``"full"``, and then the header
says that the speedup was not measured at them. No ``# cpu-sizes:`` comment is carried over:
the file has one set of sizes.
"""

from __future__ import annotations

import ast
import keyword
import re
from pathlib import Path

from cudal1_tui import __version__
from cudal1_tui.errors import ExportError
from cudal1_tui.measurements import basis_text, max_errors
from cudal1_tui.problem.sizing import cpu_sizes, shrink_for_cpu, size_constants
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


def module_name_for(name: str) -> str:
    """An importable module name close to ``name``: ``optimized-diag`` -> ``optimized_diag``."""
    valid = re.sub(r"\W", "_", name).strip("_") or "optimized"
    if valid[0].isdigit() or keyword.iskeyword(valid):
        valid = f"optimized_{valid}"
    return valid


def check_module_name(path: Path, session_id: str) -> None:
    name = path.stem
    if not name.isidentifier() or keyword.iskeyword(name):
        better = path.with_name(module_name_for(name) + path.suffix)
        raise ExportError(f"{name!r} cannot be imported as a Python module name (letters, "
                          "digits and _ only, not starting with a digit)",
                          fix=f"cudal1-tui export {session_id} --format module -o {better}")


def _fmt(value: float | None, unit: str = "") -> str:
    return f"{value:.4g}{unit}" if value is not None else "n/a"


def _pairs(mapping: object, sep: str = " ") -> str:
    """``torch 2.13.0, python 3.11.9``; empty values (no CUDA on a CPU build) left out."""
    if isinstance(mapping, dict):
        shown = [f"{k}{sep}{v}" for k, v in mapping.items() if v not in (None, "")]
        if shown:
            return ", ".join(shown)
    return "unknown"


def measured_sizes(data: SessionData) -> tuple[str, str]:
    """(the reference source at the sizes the session measured at, how to name them)."""
    source = data.reference_source
    if data.meta.extra.get("cpu_sizes") is True and cpu_sizes(source):
        return shrink_for_cpu(source), "the file's # cpu-sizes"
    return source, "the file's sizes"


def sizes_text(source: str) -> str:
    sizes = [f"{c.name}={c.value!r}" for c in size_constants(source)]
    return ", ".join(dict.fromkeys(sizes)) or "none (the inputs are fixed)"


def without_cpu_sizes_comments(code: str) -> str:
    """``code`` without ``# cpu-sizes:`` lines: they would name sizes the file no longer has."""
    return "\n".join(line for line in code.splitlines()
                     if not re.match(r"\s*#\s*cpu-sizes\s*:", line))


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


def _device(data: SessionData, result_device: object) -> str:
    device = result_device if isinstance(result_device, dict) and result_device \
        else data.meta.device
    name, kind = device.get("name"), device.get("used") or device.get("type")
    if name and kind and str(kind) not in str(name):
        return f"{kind} ({name})"
    return str(name or kind or _pairs(device))


def header(data: SessionData, record: CandidateRecord, module_name: str,
           exported: str, measured: str, measured_label: str) -> str:
    result = record.result
    versions = result.versions or data.meta.versions
    abs_err, rel_err = max_errors(result)
    speedup = precision_text(result, record.speedup).replace("×", "x")
    ratio = basis_text(result).replace("×", "x")
    sizes = sizes_text(measured)
    lines = [
        f"Optimized {data.problem_name} — exported by cudal1-tui {__version__} on {now_iso()}",
        "",
        f"Use it in place of the original module: `from {module_name} import Model`.",
        "",
        "How it was measured:",
        f"  speedup            {speedup} over eager PyTorch" + (f" ({ratio})" if ratio else ""),
        f"  sizes              {sizes} ({measured_label})",
        f"  device             {_device(data, result.device)}",
        f"  versions           {_pairs(versions)}",
        f"  tolerance          {_tolerance(result.tolerance)}; "
        f"max abs err {abs_err:.3g}, max rel err {rel_err:.3g} over "
        f"{len(result.trials)} trials",
        f"  reward             {record.reward:.4g} ({record.reward_formula})",
        f"  session            {data.session_id}",
        f"  record             {record.record_id} (round {record.round}, slot {record.slot}, "
        f"{record.source})",
        f"  measured at        {record.finished_at or 'unknown'}",
    ]
    if sizes_text(exported) != sizes:
        lines += ["", f"This file sets {sizes_text(exported)}: the speedup above was NOT "
                  "measured at these sizes."]
    return "\n".join(f"# {line}".rstrip() for line in lines)


def render(data: SessionData, record: CandidateRecord, module_name: str,
           sizes: str = "measured") -> str:
    measured, label = measured_sizes(data)
    exported = data.reference_source if sizes == "full" else measured
    helpers = reference_helpers(exported)
    code = without_cpu_sizes_comments(without_assignments(record.code, assigned_names(helpers)))
    head = header(data, record, module_name, exported, measured, label)
    return (f"{head}\n\n{code.rstrip()}\n\n\n"
            "# --- added by cudal1-tui export: the name and the inputs of the reference ---\n"
            f"Model = ModelNew\n\n{helpers}\n")


def write(sessions: list[SessionData], options: ExportOptions, path: Path) -> int:
    if len(sessions) != 1:
        raise ExportError("the module format exports one session at a time",
                          fix=f"cudal1-tui export {sessions[0].session_id} --format module "
                          f"-o {path}")
    data = sessions[0]
    if data.accepted is None:
        problem = data.meta.problem_path or f"{data.problem_name}.py"
        raise ExportError(f"session {data.session_id} has no accepted candidate (accept one "
                          "in the app with `a`, then export again)",
                          fix=f"cudal1-tui {problem} --resume {data.session_id}")
    check_module_name(path, data.session_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(data, data.accepted, path.stem, options.module_sizes),
                    encoding="utf-8")
    return 1
