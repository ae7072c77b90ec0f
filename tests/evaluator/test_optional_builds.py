"""Verdicts follow what runs (issue 22): a build that fails inside the candidate's own
``try/except`` is a runtime fact. The module imports and runs, so it is judged by its outputs and
timed, with the note "optional build failed; fallback ran"; ``compile_error`` is kept for a
candidate whose import or construction fails.

Real g++ runs: the failing builds fail fast (an unknown compiler flag, the shape model output
takes: ``cpp_sources=""`` with ``functions=[...]``).
"""

from __future__ import annotations

from pathlib import Path

from evaluator_cases import DIAG_PROBLEM, job

from cudal1_evaluator.launch import build, evaluate
from cudal1_evaluator.schema import Result

# a build that fails before compiling anything, as torch cannot bind ``f`` either way
BUILD = ('load_inline(name="{name}", cpp_sources="", functions=["scale_rows"], '
         'extra_cflags=["--cudal1-no-such-flag"])')

GUARDED_AT_IMPORT = f'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline


def _build():
    return {BUILD.format(name="optional_import_ext")}


try:
    _ext = _build()
except Exception as exc:
    print("extension failed, using the PyTorch path:", type(exc).__name__)
    _ext = None


class ModelNew(nn.Module):
    def forward(self, A, B):
        if _ext is not None:
            return _ext.scale_rows(A, B)
        return A[:, None] * B
'''

GUARDED_IN_INIT = f'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        try:
            self.ext = {BUILD.format(name="optional_init_ext")}
        except RuntimeError:
            self.ext = None

    def forward(self, A, B):
        return A[:, None] * B if self.ext is None else self.ext.scale_rows(A, B)
'''

UNGUARDED_AT_IMPORT = f'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_ext = {BUILD.format(name="required_ext")}


class ModelNew(nn.Module):
    def forward(self, A, B):
        return _ext.scale_rows(A, B)
'''

UNGUARDED_IN_FORWARD = f'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline


class ModelNew(nn.Module):
    def forward(self, A, B):
        ext = {BUILD.format(name="forward_ext")}
        return ext.scale_rows(A, B)
'''


def _codes(result: Result) -> dict[str, str]:
    return {f.code: f.severity for f in result.flags}


def test_a_handled_build_failure_at_import_is_judged_by_what_runs(tmp_path: Path) -> None:
    the_job = job(DIAG_PROBLEM, GUARDED_AT_IMPORT, tmp_path, strict_threshold=1e9)
    built = build(the_job)
    assert built.ok and built.status == "ok", built.message
    assert "optional_import_ext" in built.message  # the build stage says what failed
    result = evaluate(the_job)
    assert result.status == "ok", result.message
    assert _codes(result).get("optional_build_failed") == "warn"
    reason = next(f.reason for f in result.flags if f.code == "optional_build_failed")
    assert "fallback ran" in reason and "optional_import_ext" in reason
    assert result.speedup is not None and result.speedup > 1.0  # the fallback's own speedup
    assert result.reward > 0.0


def test_a_handled_build_failure_in_init_is_not_a_compile_error(tmp_path: Path) -> None:
    the_job = job(DIAG_PROBLEM, GUARDED_IN_INIT, tmp_path, strict_threshold=1e9)
    built = build(the_job)
    assert built.status == "ok", built.message
    result = evaluate(the_job)
    assert result.status == "ok", result.message
    assert "optional_build_failed" in _codes(result) and result.speedup is not None


def test_a_failed_import_is_still_a_compile_error(tmp_path: Path) -> None:
    the_job = job(DIAG_PROBLEM, UNGUARDED_AT_IMPORT, tmp_path)
    built = build(the_job)
    assert built.status == "compile_error" and "required_ext" in built.message
    result = evaluate(the_job)
    assert result.status == "compile_error", result.message
    assert "optional_build_failed" not in _codes(result)
    assert result.speedup is None and result.reward == 0.0


def test_a_build_failing_in_forward_unhandled_is_a_compile_error(tmp_path: Path) -> None:
    """Built ahead from ``forward`` by the build stage, it fails there without a verdict; the
    evaluation runs the module, whose call raises the build error: nothing handled it."""
    the_job = job(DIAG_PROBLEM, UNGUARDED_IN_FORWARD, tmp_path)
    built = build(the_job)
    assert built.status == "ok" and "forward_ext" in built.message, built.message
    result = evaluate(the_job)
    assert result.status == "compile_error", result.message
    assert "forward_ext" in result.message and result.reward == 0.0
