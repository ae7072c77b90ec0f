"""A cap on a candidate's total disk use (stdlib only; the parent's side).

RLIMIT_FSIZE stops one file at its limit, not a thousand files under it. While a child runs,
the parent measures what it has written: its own temp and home dir, plus what the build
cache grew by since it started; past the cap the child's whole session is killed and the
verdict says "the candidate wrote more than N MB" (or made more entries, or a deeper tree,
or a dir less readable, than the watch can count: what it cannot see is not taken as empty).
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from cudal1_evaluator.isolation import lifetime
from cudal1_evaluator.parent import window_gate

INTERVAL_S = 1.0
# Beyond the bytes: what a scan must be able to see to count them. An honest build tree is a
# dozen levels deep and a few thousand entries; past these the watch cannot vouch for the
# bytes (a deeper tree's scan would cost an fd per level; a million empty files cost inodes,
# not bytes), so passing one is passing the cap.
DEPTH_MOST = 64
ENTRIES_MOST = 200_000
_GONE = (errno.ENOENT, errno.ENOTDIR, errno.ELOOP)  # removed or replaced while scanned


@dataclass
class Use:
    """What a scan found under a root: bytes allocated, entries (files and dirs), and the dirs
    it could not count, by (device, inode), with why."""

    bytes: int = 0
    entries: int = 0
    blind: dict[tuple[int, int], str] = field(default_factory=dict)

    @property
    def mb(self) -> float:
        return self.bytes / 2**20

    def minus(self, base: Use) -> Use:
        """The growth since ``base``; a dir that was already blind then is not news."""
        return Use(max(0, self.bytes - base.bytes), max(0, self.entries - base.entries),
                   {k: v for k, v in self.blind.items() if k not in base.blind})

    def add(self, other: Use) -> None:
        self.bytes += other.bytes
        self.entries += other.entries
        self.blind.update(other.blind)


def disk_use(root: Path, gate: window_gate.Gate | None = None,
             entries_most: int | None = None) -> Use:
    """Blocks allocated under ``root`` (a sparse file counts for what it really takes, a
    directory for its own blocks too), walked by directory fds so no path grows past PATH_MAX
    (round 14: a tree deeper than 4096 characters was blind to a path walk). A dir the walk
    cannot enter (unreadable, or deeper than ``DEPTH_MOST``) is ``blind``: what the scan
    cannot count it does not assume empty. The scan stops past ``entries_most`` entries and
    pauses before each entry while a window is timed (``window_gate``)."""
    use, most = Use(), ENTRIES_MOST if entries_most is None else entries_most
    try:
        top = os.open(root, lifetime.OPEN_DIR)
    except OSError:
        return use  # not made yet, or gone: nothing written there
    frames = [(top, _subdirs(top, use, gate))]
    try:
        while frames and use.entries <= most:
            fd, pending = frames[-1]
            if not pending:
                os.close(frames.pop()[0])
                continue
            sub = _enter(fd, pending.pop(), len(frames), use)
            if sub is not None:
                frames.append((sub, _subdirs(sub, use, gate)))
    finally:
        for fd, _ in frames:
            os.close(fd)
    return use


def _enter(fd: int, name: str, depth: int, use: Use) -> int | None:
    """An fd of the subdir ``name`` of ``fd``, or None: gone, or blind (noted in ``use``)."""
    try:
        if depth < DEPTH_MOST:
            return os.open(name, lifetime.OPEN_DIR, dir_fd=fd)
        why = f"a directory tree deeper than {DEPTH_MOST} levels"
    except OSError as exc:
        if exc.errno in _GONE:
            return None
        why = f"a directory the evaluator cannot read ({exc.strerror})"
    with contextlib.suppress(OSError):
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        use.blind[(st.st_dev, st.st_ino)] = why
    return None


def _subdirs(fd: int, use: Use, gate: window_gate.Gate | None) -> list[str]:
    """Count the entries of the open dir ``fd`` into ``use``; the names of its subdirs."""
    dirs: list[str] = []
    try:
        with os.scandir(fd) as entries:
            for entry in entries:
                if gate is not None:
                    gate.between_windows()
                use.entries += 1
                with contextlib.suppress(OSError):
                    use.bytes += entry.stat(follow_symlinks=False).st_blocks * 512
                    if entry.is_dir(follow_symlinks=False):
                        dirs.append(entry.name)
    except OSError as exc:
        if exc.errno not in _GONE:
            st = os.fstat(fd)
            use.blind[(st.st_dev, st.st_ino)] = f"a directory the evaluator cannot list " \
                                                f"({exc.strerror})"
    return dirs


class DiskWatch:
    """Watches ``own`` dirs (wholly the child's) and ``shared`` ones (counted by growth); its
    scans wait at ``gate_of()``'s gate while a window is timed (the baseline scan of the
    shared dirs, before the child runs, does not). ``exceeded`` is why the child was killed
    ("" while it was not)."""

    def __init__(self, own: list[Path], shared: list[Path], limit_mb: int,
                 gate_of: Callable[[], window_gate.Gate] = lambda: window_gate.OPEN) -> None:
        self.own, self.limit_mb, self.gate_of = own, limit_mb, gate_of
        self.baseline = {path: disk_use(path, entries_most=2**62) for path in shared}
        self.exceeded = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def used(self) -> Use:
        gate, total = self.gate_of(), Use()
        for path in self.own:
            total.add(disk_use(path, gate))
        for path, base in self.baseline.items():
            total.add(disk_use(path, gate, ENTRIES_MOST + base.entries).minus(base))
        return total

    def over(self) -> str:
        """Why what the child wrote passes the cap, or ""."""
        use = self.used()
        if use.blind:
            return next(iter(use.blind.values()))
        if use.entries > ENTRIES_MOST:
            return f"more than {ENTRIES_MOST} files and dirs"
        return f"more than {self.limit_mb} MB" if use.mb > self.limit_mb else ""

    def start(self, session_id: int) -> DiskWatch:
        self._thread = threading.Thread(target=self._loop, args=(session_id,), daemon=True,
                                        name="disk-watch")
        self._thread.start()
        return self

    def _loop(self, session_id: int) -> None:
        while not self._stop.wait(INTERVAL_S):
            why = self.over()
            if why:
                self.exceeded = why
                lifetime.kill_session(session_id)
                return

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)


def message(why: str) -> str:
    """The verdict's head for a child the watch killed, ``why`` being ``DiskWatch.over()``."""
    return (f"the candidate wrote {why} to disk (its temp, home and build dirs together) and "
            "was killed")
