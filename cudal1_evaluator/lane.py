"""One timing lane's own process: the trusted clock away from the app's threads (stdlib only).

``python -m cudal1_evaluator lane`` serves evaluations and probes, one at a time, for the
process that started it, over one Unix socket on its stdin and stdout (a socket cannot be
reopened through ``/proc/<pid>/fd``, a pipe can). Once it is not dumpable it says
``{"ready": true}``; then the first line in is the session's key (``{"key": "<hex>"}``), and
every line after it, either way, is sealed with it (``seal``: the message's JSON and its
HMAC). A line that does not open is another process's write into the channel: the side that
reads it ends the lane, never believes it.

    in:  {"id": 1, "op": "evaluate", "job": "<Job JSON>"}     (or "probe" with a ProbeJob)
         {"id": 1, "op": "cancel"}
    out: {"id": 1, "progress": [stage, done, total, text]}
         {"id": 1, "result": "<Result or ProbeResult JSON>"}
         {"id": 1, "error": "why there is no result"}

Why a process of its own: the conductor's clock is ``perf_counter`` in a Python thread, and
every call of a window wakes it. In the app's process it shared the interpreter lock with
the screen, the model stream, the session's writes and every other lane's conductor: a busy
Python thread there made a 0.21 ms call read 16-27 ms (``benchmarks/app_thread_noise.py``).
Here the only other threads are this module's reader and writer, which sleep in system
calls, and the evaluator's own helpers, which wait in windows (``window_gate``). Warm
children are this process's: a lane keeps its own ready for its next evaluation.

The lane ends when its channel closes (the app exited or died): a running evaluation is
cancelled, and its children die with this process's watchdog pipe.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import queue
import sys
import threading
from typing import IO, Any

from cudal1_evaluator.isolation.dumpable import set_dumpable

EXIT_GRACE_S = 5.0  # a cancelled evaluation's children are given this long to go
log = logging.getLogger(__name__)


def not_dumpable() -> bool:
    """No process of this user can open this one's /proc entries (its descriptors, memory,
    environment) or attach to it, where no sandbox layer hides it from a candidate; the
    first thing a trusted process does (the app, each lane). True once it holds (Linux)."""
    return set_dumpable(False)


def seal(key: bytes, message: dict[str, Any]) -> bytes:
    """One protocol line: the message's JSON and its HMAC under the session's key."""
    body = json.dumps(message)
    mac = hmac.new(key, body.encode(), hashlib.sha256).hexdigest()
    return json.dumps({"body": body, "mac": mac}).encode() + b"\n"


def unseal(key: bytes, line: bytes) -> dict[str, Any] | None:
    """The message of a line sealed with ``key``; None for anything else."""
    try:
        outer = json.loads(line)
        body, mac = outer["body"], outer["mac"]
        good = hmac.new(key, body.encode(), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(good, str(mac)):
            return None
        message = json.loads(body)
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
    return message if isinstance(message, dict) else None


class _Outbox:
    """Lines to the app, written by a thread of their own: a progress event costs the
    conductor one queue put, never a blocking write inside a window."""

    def __init__(self, stream: IO[bytes], key: bytes) -> None:
        self._stream, self._key = stream, key
        self._lines: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._drain, name="lane-writer", daemon=True)
        self._thread.start()

    def put(self, message: dict[str, Any]) -> None:
        self._lines.put(message)

    def close(self) -> None:
        self._lines.put(None)
        self._thread.join(timeout=EXIT_GRACE_S)

    def _drain(self) -> None:
        while (message := self._lines.get()) is not None:
            try:
                self._stream.write(seal(self._key, message))
                self._stream.flush()
            except (OSError, ValueError):  # the app is gone: nobody to tell
                return


class _Inbox:
    """Requests from the app, each with a cancel event of its own (a cancel names its
    request); the end of stdin cancels everything."""

    def __init__(self, stream: IO[bytes], key: bytes) -> None:
        self.requests: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.closed = threading.Event()
        self._cancels: dict[object, threading.Event] = {}
        self._lock = threading.Lock()
        self._stream, self._key = stream, key
        threading.Thread(target=self._read, name="lane-reader", daemon=True).start()

    def cancel_of(self, ident: object) -> threading.Event:
        with self._lock:
            return self._cancels.setdefault(ident, threading.Event())

    def done(self, ident: object) -> None:
        with self._lock:
            self._cancels.pop(ident, None)

    def _read(self) -> None:
        try:
            for line in iter(self._stream.readline, b""):
                message = unseal(self._key, line)
                if message is None:
                    log.error("lane: a line of %d bytes not sealed with the session's key: "
                              "another process wrote into the channel; the lane ends now",
                              len(line))
                    sys.stderr.flush()
                    os._exit(3)  # nothing more from us: the app must not read a result
                if message.get("op") == "cancel":
                    self.cancel_of(message.get("id")).set()
                else:
                    self.cancel_of(message.get("id"))
                    self.requests.put(message)
        except (OSError, ValueError):  # a socket whose peer died with our lines unread
            pass
        finally:
            self.closed.set()
            with self._lock:
                for event in self._cancels.values():
                    event.set()
            self.requests.put(None)


def _answer(message: dict[str, Any], inbox: _Inbox, outbox: _Outbox) -> dict[str, Any]:
    from cudal1_evaluator import launch
    from cudal1_evaluator.schema import Job, ProbeJob

    ident = message.get("id")
    op, text = message.get("op"), message.get("job")
    cancel = inbox.cancel_of(ident)
    if not isinstance(text, str):
        return {"id": ident, "error": "the request carries no job"}

    def progress(stage: str, done: int, total: int, note: str) -> None:
        outbox.put({"id": ident, "progress": [stage, done, total, note]})

    try:
        if op == "evaluate":
            job = Job.from_json(text)
            return {"id": ident, "result": launch.evaluate(
                job, on_progress=progress, cancel=cancel).to_json()}
        if op == "probe":
            return {"id": ident, "result": launch.probe(ProbeJob.from_json(text)).to_json()}
    except (ValueError, TypeError, KeyError) as exc:
        return {"id": ident, "error": f"a malformed {op} job: {exc}"}
    except Exception as exc:  # the evaluator's own failure: said, and the lane serves on
        log.exception("lane: %s failed", op)
        return {"id": ident, "error": f"the evaluator failed: {type(exc).__name__}: {exc}"}
    return {"id": ident, "error": f"unknown op {op!r}"}


def serve(stdin: IO[bytes], stdout: IO[bytes], *, warm_children: bool = True) -> int:
    """Turn non-dumpable, say ready, then answer requests until the channel closes; the
    first line in is the key."""
    from cudal1_evaluator.parent import warm

    if sys.platform.startswith("linux") and not not_dumpable():
        log.error("lane: could not make this process non-dumpable; refusing to serve")
        return 2
    try:
        stdout.write(json.dumps({"ready": True}).encode() + b"\n")
        stdout.flush()
        key = bytes.fromhex(json.loads(stdin.readline())["key"])
    except (ValueError, TypeError, KeyError, OSError):
        log.error("lane: the first line is not the session's key")
        return 2
    warm.enabled = warm_children
    inbox, outbox = _Inbox(stdin, key), _Outbox(stdout, key)
    try:
        while (message := inbox.requests.get()) is not None:
            if inbox.closed.is_set():
                break
            outbox.put(_answer(message, inbox, outbox))
            inbox.done(message.get("id"))
    finally:
        warm.discard_all()
        outbox.close()
    return 0


def main(warm_children: bool = True) -> int:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")
    # the protocol on descriptors of its own; 0 and 1 become /dev/null and stderr, so no
    # print and no process started here without its own streams can read or write it
    stdin, stdout = os.fdopen(os.dup(0), "rb"), os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(2, 1)
    os.close(null)
    sys.stdout = sys.stderr
    code = serve(stdin, stdout, warm_children=warm_children)
    sys.stderr.flush()
    os._exit(code)  # no lingering helper thread between us and the exit
