"""``cudal1-tui FILE``: bad input gets a message and a fix, never a traceback."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

EXE = shutil.which("cudal1-tui")
pytestmark = pytest.mark.skipif(EXE is None, reason="cudal1-tui is not on PATH")


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    out = subprocess.run([str(EXE), str(tmp_path / "nope.py")], capture_output=True, text=True,
                         timeout=60, check=False)
    assert out.returncode == 1
    assert "no such file" in out.stderr and "fix:" in out.stderr
    assert "Traceback" not in out.stderr


def test_open_help_lists_resume_and_sizes() -> None:
    out = subprocess.run([str(EXE), "open", "--help"], capture_output=True, text=True,
                         timeout=60, check=True)
    assert "--resume" in out.stdout and "--sizes" in out.stdout
    assert "--measure-startup" not in out.stdout
