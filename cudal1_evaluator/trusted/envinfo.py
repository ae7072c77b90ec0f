"""Device and software versions seen from inside an evaluator child (torch side)."""

from __future__ import annotations

import importlib.metadata
import platform
from pathlib import Path

import torch

from cudal1_evaluator.verdict_details import DeviceInfo


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def device_info(device: torch.device) -> DeviceInfo:
    if device.type != "cuda":
        return {"type": "cpu", "name": _cpu_name(), "capability": None, "cuda": None,
                "threads": torch.get_num_threads()}
    props = torch.cuda.get_device_properties(device)
    return {
        "type": "cuda",
        "index": device.index,
        "name": props.name,
        "capability": f"{props.major}.{props.minor}",
        "cuda": torch.version.cuda,
        "memory_gb": round(props.total_memory / 2**30, 1),
        "sm_count": props.multi_processor_count,
        "l2_mb": round(int(getattr(props, "L2_cache_size", 0)) / 2**20, 1),
        "uuid": str(getattr(props, "uuid", "") or ""),
    }


def versions() -> dict[str, str]:
    found = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": str(torch.version.cuda or ""),
    }
    for package in ("triton", "ninja"):
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            continue
    return found


def arch_tag(device: torch.device) -> str:
    if device.type != "cuda":
        return f"cpu-{platform.machine()}"
    major, minor = torch.cuda.get_device_capability(device)
    return f"sm_{major}{minor}"


def free_memory(device: torch.device) -> int:
    """Bytes free on the device now (on a CPU, what the host has available)."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0
