"""The verdict and progress channels between a child and its parent (stdlib only).

The parent passes three pipe fds: a result pipe, a progress pipe, and a key pipe
holding a random HMAC key. The child reads the key, then moves the result and
progress fds to random high numbers (close-on-exec) so candidate code cannot
find them by number. The verdict is one signed JSON line: a forged, extra or
unsigned line is reported, never trusted.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import json
import os
import secrets
import time
from collections.abc import Mapping
from typing import Any

KEY_BYTES = 32


def new_key() -> bytes:
    return secrets.token_bytes(KEY_BYTES)


def _mac(key: bytes, body: str) -> str:
    return hmac.new(key, body.encode("utf-8"), hashlib.sha256).hexdigest()


def read_verdict(data: bytes, key: bytes) -> tuple[dict[str, Any] | None, str]:
    """(payload, problem): exactly one validly signed line is accepted."""
    lines = [line for line in data.split(b"\n") if line.strip()]
    good: list[dict[str, Any]] = []
    for line in lines:
        try:
            msg = json.loads(line)
            body = msg["body"]
            if isinstance(body, str) and hmac.compare_digest(_mac(key, body), str(msg["mac"])):
                payload = json.loads(body)
                if isinstance(payload, dict):  # a signed body that is not an object is no verdict
                    good.append(payload)
        except (ValueError, KeyError, TypeError):
            continue
    if len(good) == 1 and len(lines) == 1:
        return good[0], ""
    if not lines:
        return None, ""
    problem = f"the verdict channel held {len(lines)} message(s), {len(good)} validly signed"
    return (good[-1] if len(good) == 1 else None), problem


def parse_progress(line: bytes) -> tuple[str, int, int, str] | None:
    try:
        stage, done, total, detail = json.loads(line)
        return str(stage), int(done), int(total), str(detail)[:200]
    except (ValueError, TypeError, RecursionError):  # "[[[[..." nests past the limit
        return None


def _hide(fd: int) -> int:
    """Move ``fd`` to a random free number, close-on-exec, and close the original."""
    soft = os.sysconf("SC_OPEN_MAX")
    high = max(64, min(soft, 4096) - 1)
    start = 32 + secrets.randbelow(max(1, high - 64))
    new = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, start)
    os.close(fd)
    return new


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


class WorkerChannel:
    """The child's end. Create it before any candidate code is imported."""

    def __init__(self, result_fd: int, progress_fd: int, key_fd: int) -> None:
        key = b""
        while len(key) < KEY_BYTES and (chunk := os.read(key_fd, KEY_BYTES)):
            key += chunk
        os.close(key_fd)
        self._key = key
        self._result_fd: int | None = _hide(result_fd)
        self._progress_fd: int | None = _hide(progress_fd)
        self._last = ("", 0.0)

    def progress(self, stage: str, done: int, total: int, detail: str = "") -> None:
        """At most ~10 updates a second per stage; a stage's first and last always go."""
        if self._progress_fd is None:
            return
        now = time.monotonic()
        if stage == self._last[0] and now - self._last[1] < 0.1 and 0 < done < total:
            return
        self._last = (stage, now)
        with contextlib.suppress(OSError):
            line = json.dumps([stage, done, total, detail]) + "\n"
            _write_all(self._progress_fd, line.encode("utf-8"))

    def send(self, payload: Mapping[str, object]) -> None:
        """Send the one verdict and close both channels."""
        if self._result_fd is None:
            return
        body = json.dumps(payload, default=str, allow_nan=True)
        line = json.dumps({"body": body, "mac": _mac(self._key, body)}) + "\n"
        fd, self._result_fd = self._result_fd, None
        try:
            _write_all(fd, line.encode("utf-8"))
        finally:
            os.close(fd)
            if self._progress_fd is not None:
                os.close(self._progress_fd)
                self._progress_fd = None

