"""A problem that fails its probe fails before any screen, compiler-style, exit code 1: in the
app, ``run`` and ``eval`` alike (issue 23)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HERE = {**os.environ, "PYTHONPATH": str(ROOT), "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1"}
RAISES = ROOT / "tests" / "data" / "broken_problems" / "runtime" / "raises_in_forward.py"
CANDIDATE = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x @ x
'''


@pytest.mark.parametrize("command", ["app", "resume", "run", "eval"])
def test_a_problem_that_fails_its_probe_is_one_compiler_style_error(
        command: str, tmp_path: Path) -> None:
    problem = tmp_path / "raises.py"
    problem.write_text(RAISES.read_text(encoding="utf-8"), encoding="utf-8")
    candidate = tmp_path / "cand.py"
    candidate.write_text(CANDIDATE, encoding="utf-8")
    sessions = ["--sessions-dir", str(tmp_path / "sessions")]
    argv = {
        "app": [str(problem), "--device", "cpu", *sessions],
        # a resumed session's problem is probed before the app opens too
        "resume": [str(problem), "--device", "cpu", *sessions, "--resume",
                   "2026-11-27_0000_raises_000000"],
        "run": ["run", str(problem), "--headless", "--rounds", "1", "--device", "cpu",
                "--no-builtin", *sessions],
        "eval": ["eval", str(problem), str(candidate), "--device", "cpu"],
    }[command]
    done = subprocess.run([sys.executable, "-m", "cudal1_tui", *argv], env=HERE, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert done.returncode == 1, (done.stdout, done.stderr)
    lines = done.stderr.splitlines()
    errors = [line for line in lines if ": error: " in line]
    assert len(errors) == 1, done.stderr
    assert errors[0].startswith(f"{problem}:7: error: the probe of the reference failed "
                                "(raises): "), errors[0]
    fix = next(line for line in lines if line.startswith("fix: "))
    assert fix.startswith(f"fix: cudal1-tui inspect {problem}")
    # no internals: the evaluator's temp dirs, a traceback, a verdict without one
    for internal in ("cudal1-eval-", "Traceback", "without a verdict", "call open() first"):
        assert internal not in done.stdout + done.stderr, internal
    assert "\x1b[?1049h" not in done.stdout  # the app never took over the screen
    assert not (tmp_path / "sessions").exists() or not any((tmp_path / "sessions").iterdir())
