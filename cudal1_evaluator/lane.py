"""One timing lane's own process: the trusted clock away from the app's threads (stdlib only).

``python -m cudal1_evaluator lane`` serves evaluations and probes, one at a time, for the
process that started it, over its stdin and stdout: one JSON object a line.

    in:  {"id": 1, "op": "evaluate", "job": "<Job JSON>"}     (or "probe" with a ProbeJob)
         {"id": 1, "op": "cancel"}
    out: {"id": 1, "progress": [stage, done, total, text]}
         {"id": 1, "result": "<Result or ProbeResult JSON>"}
         {"id": 1, "error": "why there is no result"}

Why a process of its own: the conductor's clock is ``perf_counter`` in a Python thread, and
every call of a window wakes it. In the app's process it shared the interpreter lock with
the screen, the model stream, the session's writes and every other lane's conductor: a busy
Python thread there made a 0.24 ms call read 20-27 ms (``benchmarks/app_thread_noise.py``).
Here the only other threads are this module's reader and writer, which sleep in system
calls, and the evaluator's own helpers, which wait in windows (``window_gate``). Warm
children are this process's: a lane keeps its own ready for its next evaluation.

The lane ends when its stdin closes (the app exited or died): a running evaluation is
cancelled, and its children die with this process's watchdog pipe.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import sys
import threading
from typing import IO, Any

EXIT_GRACE_S = 5.0  # a cancelled evaluation's children are given this long to go


class _Outbox:
    """Lines to the app, written by a thread of their own: a progress event costs the
    conductor one queue put, never a blocking write inside a window."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
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
                self._stream.write(json.dumps(message).encode() + b"\n")
                self._stream.flush()
            except (OSError, ValueError):  # the app is gone: nobody to tell
                return


class _Inbox:
    """Requests from the app. A cancel sets the running request's event at once; the end of
    stdin cancels everything."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.requests: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.cancel = threading.Event()  # the running request's
        self.closed = threading.Event()
        self._stream = stream
        threading.Thread(target=self._read, name="lane-reader", daemon=True).start()

    def _read(self) -> None:
        for line in iter(self._stream.readline, b""):
            try:
                message = json.loads(line)
            except ValueError:
                logging.getLogger(__name__).warning("lane: not a JSON line: %r", line[:200])
                continue
            if not isinstance(message, dict):
                continue
            if message.get("op") == "cancel":
                self.cancel.set()
            else:
                self.requests.put(message)
        self.closed.set()
        self.cancel.set()
        self.requests.put(None)


def _answer(message: dict[str, Any], inbox: _Inbox, outbox: _Outbox) -> dict[str, Any]:
    from cudal1_evaluator import launch
    from cudal1_evaluator.schema import Job, ProbeJob

    ident = message.get("id")
    op, text = message.get("op"), message.get("job")
    if not isinstance(text, str):
        return {"id": ident, "error": "the request carries no job"}

    def progress(stage: str, done: int, total: int, note: str) -> None:
        outbox.put({"id": ident, "progress": [stage, done, total, note]})

    try:
        if op == "evaluate":
            job = Job.from_json(text)
            return {"id": ident, "result": launch.evaluate(
                job, on_progress=progress, cancel=inbox.cancel).to_json()}
        if op == "probe":
            return {"id": ident, "result": launch.probe(ProbeJob.from_json(text)).to_json()}
    except (ValueError, TypeError, KeyError) as exc:
        return {"id": ident, "error": f"a malformed {op} job: {exc}"}
    except Exception as exc:  # the evaluator's own failure: said, and the lane serves on
        logging.getLogger(__name__).exception("lane: %s failed", op)
        return {"id": ident, "error": f"the evaluator failed: {type(exc).__name__}: {exc}"}
    return {"id": ident, "error": f"unknown op {op!r}"}


def serve(stdin: IO[bytes], stdout: IO[bytes], *, warm_children: bool = True) -> int:
    """Answer requests until stdin closes."""
    from cudal1_evaluator.parent import warm

    warm.enabled = warm_children
    inbox, outbox = _Inbox(stdin), _Outbox(stdout)
    try:
        while (message := inbox.requests.get()) is not None:
            inbox.cancel.clear()
            if inbox.closed.is_set():
                break
            outbox.put(_answer(message, inbox, outbox))
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
