"""Evaluator processes a killed run left behind, ended at the next start.

A child normally dies with the process that started it (``isolation.lifetime``). One that was
stopped (SIGSTOP: the evaluator pauses the side it is not timing) when that process was
killed can outlive it: the watcher that would end it may be stopped too. Such a process is
still recognisable: its command line names an evaluator child and a ``cudal1-eval-*`` temp dir
whose name carries its owner (pid and start time). When that owner is gone, it is killed
(SIGKILL ends a stopped process too), and the sweep that follows can remove its temp dir.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
from pathlib import Path

from cudal1_evaluator.isolation import lifetime

_OWNER_IN_PATH = re.compile(re.escape(lifetime.TEMP_PREFIX) + r"(\d+)_(\d+)_")


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode("utf-8", "replace") for part in raw.split(b"\0") if part]


def _owner(args: list[str]) -> str | None:
    """The owner token of an evaluator child's command line; None for any other process."""
    if "cudal1_evaluator" not in args or "_child" not in args:
        return None
    for arg in args:
        found = _OWNER_IN_PATH.search(arg)
        if found:
            return f"{found[1]} {found[2]}"
    return None


def _ours(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}").stat().st_uid == os.getuid()
    except OSError:
        return False


def reap_orphans() -> list[int]:
    """SIGKILL every evaluator child of this user whose owner is dead; the pids killed."""
    if not Path("/proc/self").exists():
        return []
    mine, killed = lifetime.owner_token(), []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        pid = int(entry.name)
        owner = _owner(_cmdline(pid))
        if owner is None or owner == mine or lifetime.owner_alive(owner) or not _ours(pid):
            continue
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
    return killed
