"""One writer per session: an exclusive ``fcntl.flock`` on ``session.lock``."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from cudal1_tui.errors import SessionError


class SessionLock:
    """Held for as long as a session is open for writing; released on ``release`` or exit."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise unwritable(self.path.parent, exc) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise SessionError(
                f"session {self.path.parent.name} is in use by another cudal1-tui process{holder}",
                fix="close the other process first, or open the session read-only "
                "(`cudal1-tui show`)",
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    @property
    def held(self) -> bool:
        return self._fd is not None


def _read_holder(fd: int) -> str:
    try:
        pid = os.pread(fd, 32, 0).decode().strip()
    except OSError:
        return ""
    return f" (pid {pid})" if pid.isdigit() else ""


def unwritable(directory: Path, exc: OSError) -> SessionError:
    """Writing (resume, accept) needs the session folder writable; reading does not."""
    return SessionError(
        f"session {directory.name} cannot be written: {exc.strerror or exc} ({directory})",
        fix="make the sessions folder writable to resume it; `cudal1-tui show` and "
        "`cudal1-tui export` read it as it is",
    )
