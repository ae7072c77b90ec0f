"""The problem's constants in the globals snapshot: found by module identity, NaN-safe (a fresh
venv under /tmp once made numpy's NAN "the problem's" and unequal to itself)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from cudal1_evaluator.candidate_side import integrity, snapshots


def test_modules_under_tmp_are_not_the_problem(tmp_path: Path) -> None:
    """A library in a venv under /tmp (numpy's NAN) is not the problem's constants."""
    path = tmp_path / "library_under_tmp.py"
    path.write_text("NAN = float('nan')\nSIZE = 3\n")
    spec = importlib.util.spec_from_file_location("library_under_tmp", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["library_under_tmp"] = module
    try:
        spec.loader.exec_module(module)
        snapshot = integrity.snapshot_globals()
        assert not any(key.startswith("library_under_tmp.") for key in snapshot.values)
        assert integrity.diff_globals(snapshot, integrity.snapshot_globals()) == []
    finally:
        del sys.modules["library_under_tmp"]


def test_nan_constants_equal_themselves() -> None:
    assert snapshots.same_constant(float("nan"), float("nan"))
    assert snapshots.same_constant((1, float("nan")), (1, float("nan")))
    assert not snapshots.same_constant(1.0, float("nan"))
    assert not snapshots.same_constant(1, True)
