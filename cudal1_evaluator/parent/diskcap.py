"""A cap on a candidate's total disk use (stdlib only; the parent's side).

RLIMIT_FSIZE stops one file at its limit, not a thousand files under it. While a child runs,
the parent measures what it has written: its own temp and home dir, plus what the build
cache grew by since it started; past the cap the child's whole session is killed and the
verdict says "the candidate wrote more than N MB".
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from pathlib import Path

from cudal1_evaluator.isolation import lifetime
from cudal1_evaluator.parent import window_gate

INTERVAL_S = 1.0
EXTRA_KEY = "disk_exceeded_mb"  # in ``Outcome.extra``: the cap that was passed


def disk_use_mb(root: Path, gate: window_gate.Gate | None = None) -> float:
    """Blocks allocated under ``root`` (a sparse file counts for what it really takes); the
    scan pauses before each entry while a window is timed (``window_gate``): an entry deep in
    a tree costs a path walk (0.2 ms at 2000 levels), and 256 of them between looks at the
    gate once ran 28–60 ms into a window (round 13)."""
    total, stack = 0, [str(root)]
    while stack:
        with contextlib.suppress(OSError), os.scandir(stack.pop()) as entries:
            for entry in entries:
                if gate is not None:
                    gate.between_windows()
                with contextlib.suppress(OSError):
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    else:
                        total += entry.stat(follow_symlinks=False).st_blocks * 512
    return total / 2**20


class DiskWatch:
    """Watches ``own`` dirs (wholly the child's) and ``shared`` ones (counted by growth); its
    scans wait at ``gate_of()``'s gate while a window is timed (the baseline scan of the
    shared dirs, before the child runs, does not)."""

    def __init__(self, own: list[Path], shared: list[Path], limit_mb: int,
                 gate_of: Callable[[], window_gate.Gate] = lambda: window_gate.OPEN) -> None:
        self.own, self.limit_mb, self.gate_of = own, limit_mb, gate_of
        self.baseline = {path: disk_use_mb(path) for path in shared}
        self.exceeded = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def used_mb(self) -> float:
        gate = self.gate_of()
        grown = sum(max(0.0, disk_use_mb(p, gate) - base) for p, base in self.baseline.items())
        return sum(disk_use_mb(p, gate) for p in self.own) + grown

    def start(self, session_id: int) -> DiskWatch:
        self._thread = threading.Thread(target=self._loop, args=(session_id,), daemon=True,
                                        name="disk-watch")
        self._thread.start()
        return self

    def _loop(self, session_id: int) -> None:
        while not self._stop.wait(INTERVAL_S):
            if self.used_mb() > self.limit_mb:
                self.exceeded = True
                lifetime.kill_session(session_id)
                return

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)


def message(limit_mb: int) -> str:
    return (f"the candidate wrote more than {limit_mb} MB to disk (its temp, home and build "
            "dirs together) and was killed")
