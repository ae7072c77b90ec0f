"""``nvidia-smi`` queries, behind one seam: a runner that returns its CSV text or None.

The app never opens the GPU itself (no torch, no NVML binding in the app process): it asks
``nvidia-smi``, which is on PATH wherever the NVIDIA driver is. A missing or failing
``nvidia-smi`` answers None, and every caller then knows nothing rather than guessing.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass

SMI_TIMEOUT_S = 10.0

# the arguments after "nvidia-smi" -> its stdout, or None when it cannot answer
SmiRunner = Callable[[list[str]], str | None]


@dataclass(frozen=True)
class ComputeApp:
    """One process holding a CUDA context, as ``--query-compute-apps`` lists it."""

    pid: int
    process_name: str
    used_mib: int
    gpu_uuid: str


@dataclass(frozen=True)
class GpuRow:
    index: int
    uuid: str
    free_mib: int | None = None
    total_mib: int | None = None


def run_smi(args: list[str]) -> str | None:
    """The real ``nvidia-smi`` on PATH; None when it is not there or fails."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        done = subprocess.run([exe, *args], capture_output=True, text=True, check=False,
                              timeout=SMI_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def _rows(text: str) -> list[list[str]]:
    return [[cell.strip() for cell in line.split(",")] for line in text.splitlines()
            if line.strip()]


def _mib(cell: str) -> int | None:
    """``1234``, ``1234 MiB``; None for ``[N/A]`` and the like."""
    word = cell.split()[0] if cell.split() else ""
    return int(word) if word.isdigit() else None


def compute_apps(run: SmiRunner = run_smi) -> list[ComputeApp] | None:
    """The processes with a CUDA context on any GPU; None when ``nvidia-smi`` cannot say."""
    text = run(["--query-compute-apps=pid,process_name,used_memory,gpu_uuid",
                "--format=csv,noheader"])
    if text is None:
        return None
    apps = []
    for row in _rows(text):
        if len(row) < 4 or not row[0].isdigit():
            continue
        apps.append(ComputeApp(int(row[0]), row[1], _mib(row[2]) or 0, row[3]))
    return apps


def gpus(run: SmiRunner = run_smi) -> list[GpuRow] | None:
    """Every GPU with its index, UUID and memory; None when ``nvidia-smi`` cannot say."""
    text = run(["--query-gpu=index,uuid,memory.free,memory.total", "--format=csv,noheader"])
    if text is None:
        return None
    out = []
    for row in _rows(text):
        if len(row) < 2 or not row[0].isdigit():
            continue
        free = _mib(row[2]) if len(row) > 2 else None
        total = _mib(row[3]) if len(row) > 3 else None
        out.append(GpuRow(int(row[0]), row[1], free, total))
    return out


def free_mib(index: int, run: SmiRunner = run_smi) -> int | None:
    """Free memory on GPU ``index`` (nvidia-smi's numbering) now; None when unknown."""
    rows = gpus(run)
    row = next((r for r in rows or [] if r.index == index), None)
    return row.free_mib if row is not None else None
