"""Environment checks behind ``cudal1-tui doctor``. Torch is queried in a subprocess."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from typing import Literal, NotRequired, TypedDict

from cudal1_tui.config import EffectiveSettings, sessions_dir
from cudal1_tui.config.load_config import read_config_file
from cudal1_tui.errors import ConfigError
from cudal1_tui.llm.server_probe import probe_server

Status = Literal["ok", "missing", "warn"]

TORCH_QUERY = """
import json, torch
info = {"torch": torch.__version__, "cuda": torch.version.cuda, "available": False, "gpus": []}
try:
    info["available"] = torch.cuda.is_available()
    info["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
except Exception as exc:
    info["error"] = str(exc)
print(json.dumps(info))
"""


@dataclass
class Check:
    name: str
    status: Status
    detail: str
    fix: str = ""


def _version_of(command: list[str]) -> str | None:
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    lines = (out.stdout or out.stderr).strip().splitlines()
    versioned = [line for line in lines if re.search(r"\d+\.\d+", line)]
    return (versioned or lines)[0] if lines else None


class TorchInfo(TypedDict):
    """What TORCH_QUERY prints, as JSON."""

    torch: str
    cuda: str | None
    available: bool
    gpus: list[str]
    error: NotRequired[str]


def check_torch() -> list[Check]:
    try:
        out = subprocess.run([sys.executable, "-c", TORCH_QUERY], capture_output=True,
                             text=True, timeout=120, check=False)
        info: TorchInfo = json.loads(out.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.TimeoutExpired, json.JSONDecodeError, IndexError):
        return [Check("torch", "missing", "torch does not import",
                      "pip install torch (a CUDA build for GPU work)")]
    cuda = info.get("cuda") or "none (CPU build)"
    checks = [Check("torch", "ok", f"{info['torch']}, CUDA {cuda}")]
    if info.get("available"):
        checks.append(Check("gpu", "ok", ", ".join(info["gpus"])))
    else:
        checks.append(Check("gpu", "warn", "no CUDA GPU visible: candidates run on the CPU",
                            "install an NVIDIA driver and a CUDA build of torch"))
    return checks


def check_tool(name: str, candidates: list[str], flag: str, fix: str) -> Check:
    for exe in candidates:
        path = shutil.which(exe)
        if path:
            version = _version_of([path, flag]) or "version unknown"
            return Check(name, "ok", f"{path}: {version}")
    return Check(name, "missing", f"none of {', '.join(candidates)} on PATH", fix)


def check_endpoint(effective: EffectiveSettings) -> Check:
    """The model server, named for what it is (see ``cudal1_tui.llm.server_probe``)."""
    report = probe_server(effective.settings)
    return Check("model server", report.status, report.detail, report.fix)


def check_config(effective: EffectiveSettings) -> Check:
    path = effective.config_path
    if path is None or not path.is_file():
        return Check("config", "ok", f"{path} (absent: defaults apply)")
    try:
        read_config_file(path)
    except ConfigError as exc:
        return Check("config", "missing", exc.message, "fix the file")
    return Check("config", "ok", str(path))


def check_sessions_dir(effective: EffectiveSettings) -> Check:
    path = sessions_dir(effective.settings)
    probe = path if path.exists() else path.parent
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if os.access(probe, os.W_OK):
        return Check("sessions", "ok", str(path))
    return Check("sessions", "missing", f"{path} is not writable",
                 "set sessions_dir in the config or pass --sessions-dir")


def check_sandbox() -> Check:
    """Which OS sandbox layers an evaluator child gets here, measured in a throwaway process."""
    from cudal1_evaluator.isolation.sandbox_layers import probe

    confined, detail = probe()
    if confined:
        return Check("sandbox", "ok", detail)
    return Check("sandbox", "warn", detail, "candidates still run under the evaluator's guard, "
                 "but without a read-only file system: use a kernel with landlock (5.13+), "
                 "allow unprivileged user namespaces, or install bubblewrap")


def _cuda_home_nvcc() -> list[str]:
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    return ["nvcc", os.path.join(home, "bin", "nvcc")]


def run_checks(effective: EffectiveSettings) -> list[Check]:
    python = Check("python", "ok", re.sub(r"\s+", " ", sys.version))
    return [
        python,
        *check_torch(),
        check_tool("nvcc", _cuda_home_nvcc(), "--version",
                   "install the CUDA toolkit and set CUDA_HOME (CUDA candidates need it)"),
        check_tool("ninja", ["ninja"], "--version", "pip install ninja"),
        check_tool("host compiler", ["c++", "g++", "clang++"], "--version",
                   "install g++ (apt-get install g++)"),
        check_endpoint(effective),
        check_config(effective),
        check_sessions_dir(effective),
        check_sandbox(),
    ]
