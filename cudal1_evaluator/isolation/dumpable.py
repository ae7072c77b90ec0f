"""Whether other processes of this uid may open this process's ``/proc`` entries (memory,
descriptors, environment) or attach to it: ``PR_SET_DUMPABLE`` (stdlib only, Linux)."""

from __future__ import annotations

import ctypes
import sys

_PR_GET_DUMPABLE, _PR_SET_DUMPABLE = 3, 4


def set_dumpable(on: bool) -> bool:
    """Set this process's flag; True once it reads back as set (always False off Linux)."""
    if not sys.platform.startswith("linux"):
        return False
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    prctl(_PR_SET_DUMPABLE, int(on), 0, 0, 0)
    return int(prctl(_PR_GET_DUMPABLE, 0, 0, 0, 0)) == int(on)
