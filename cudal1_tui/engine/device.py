"""Which device candidates run on: ``auto`` asks torch, in a subprocess, whether it sees a GPU.

The app process never imports torch; a short-lived interpreter answers instead.
"""

from __future__ import annotations

import functools
import subprocess
import sys

from cudal1_tui.config.validate import DEVICE_CHOICES, is_device
from cudal1_tui.errors import ConfigError

# PR_SET_PDEATHSIG first: a killed app does not leave this child importing torch
_QUERY = ("import ctypes, signal\n"
          "try:\n    ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)\n"
          "except (OSError, AttributeError):\n    pass\n"
          "import torch; print('cuda' if torch.cuda.is_available() else 'cpu')")


@functools.cache
def detect_device(timeout_s: float = 120.0) -> str:
    """``cuda`` when torch (in a fresh interpreter) sees a CUDA GPU, else ``cpu``; asked once
    a process (the app's early probe and its session ask the same)."""
    try:
        done = subprocess.run([sys.executable, "-c", _QUERY], capture_output=True, text=True,
                              timeout=timeout_s, check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return "cpu"
    answer = done.stdout.strip().splitlines()[-1:] if done.returncode == 0 else []
    return "cuda" if answer == ["cuda"] else "cpu"


def resolve_device(requested: str) -> str:
    """``auto`` → ``cuda`` or ``cpu``; ``cpu``, ``cuda`` and ``cuda:N`` pass through."""
    value = requested.strip().lower()
    if value == "auto":
        return detect_device()
    if is_device(value):
        return value
    raise ConfigError(f"device {requested!r} is not one of {DEVICE_CHOICES}")


_COUNT = _QUERY.replace("print('cuda' if torch.cuda.is_available() else 'cpu')",
                        "print(torch.cuda.device_count() if torch.cuda.is_available() else 0)")


def gpu_count(timeout_s: float = 120.0) -> int:
    """How many CUDA GPUs torch sees in a fresh interpreter (``CUDA_VISIBLE_DEVICES``
    applies); 0 when torch sees none or cannot answer."""
    try:
        done = subprocess.run([sys.executable, "-c", _COUNT], capture_output=True, text=True,
                              timeout=timeout_s, check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    answer = done.stdout.strip().splitlines()[-1:] if done.returncode == 0 else []
    return int(answer[0]) if answer and answer[0].isdigit() else 0
