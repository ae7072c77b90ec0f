"""Drop every Linux capability of a candidate-mode child (stdlib only, ctypes; Linux).

A candidate that runs as root (CI, containers, GPU hosts), or as root of the user namespace
its child made, holds capabilities in the PID namespace it shares with nothing trusted but the
init. With them it could rewrite what the parent reads about it: the namespace's last PID
(``/proc/sys/kernel/ns_last_pid``, which tells the parent whether a task was created while the
namespace was stopped), its own resource limits, other members' priorities. So the child's
work process drops them all, after the sandbox's other layers (which need them) and before
any candidate code: the bounding set (an ``execve`` of a set-uid file gains nothing either),
the ambient set, then the effective, permitted and inheritable sets.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

_PR_CAPBSET_DROP = 24
_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
LAYER = "capabilities"


class _Header(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _Data(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def _last_cap() -> int:
    try:
        return int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    except (OSError, ValueError):
        return 63  # unknown numbers answer EINVAL, which is ignored


def drop_all() -> tuple[bool, str]:
    """(dropped, what happened): every capability of this process gone, for good. A process
    that holds none (a user without a user namespace of its own) has nothing to drop: its
    bounding set stays, and no-new-privs (landlock's) keeps a set-uid file from using it."""
    if not held("CapPrm") and not held("CapAmb"):
        return True, "none held"
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in range(_last_cap() + 1):
        if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() != 22:
            return False, f"PR_CAPBSET_DROP({cap}): {os.strerror(ctypes.get_errno())}"
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)  # EINVAL before 4.3
    header = _Header(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_Data * 2)()
    if libc.capset(ctypes.byref(header), data) != 0:
        return False, f"capset: {os.strerror(ctypes.get_errno())}"
    return True, "none held (bounding, ambient, effective and permitted sets empty)"


def held(which: str = "CapEff") -> int:
    """One of this process's capability masks (``CapEff``, ``CapPrm``, ``CapAmb``...), from
    ``/proc/self/status``; 0 where it cannot be read."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(f"{which}:"):
                return int(line.split()[1], 16)
    except (OSError, ValueError):
        pass
    return 0
