"""Compiler and driver versions, asked once per parent process (stdlib only)."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from pathlib import Path


def _output(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def _nvcc() -> str | None:
    found = shutil.which("nvcc")
    if found:
        return found
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and (Path(home) / "bin" / "nvcc").exists():
            return str(Path(home) / "bin" / "nvcc")
    return None


@functools.lru_cache(maxsize=1)
def tool_versions() -> dict[str, str]:
    found: dict[str, str] = {}
    nvcc = _nvcc()
    if nvcc:
        match = re.search(r"release ([\d.]+), V([\d.]+)", _output([nvcc, "--version"]))
        if match:
            found["nvcc"] = match.group(2)
    gcc = _output([os.environ.get("CXX") or "gcc", "-dumpfullversion"])
    if gcc:
        found["gcc"] = gcc.splitlines()[0]
    return found


@functools.lru_cache(maxsize=1)
def driver_version() -> str:
    if not shutil.which("nvidia-smi"):
        return ""
    out = _output(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
    return out.splitlines()[0].strip() if out else ""
