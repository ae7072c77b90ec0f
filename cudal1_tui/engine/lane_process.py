"""Each timing lane's evaluations run in a process of its own (``cudal1_evaluator.lane``).

The conductor's clock used to tick in a thread of this process, beside the screen, the model
stream, session writes and the other lanes' conductors: any of them holding the interpreter
lock delayed the clock's wake-ups (a 0.24 ms call read 20-27 ms beside one busy thread;
``benchmarks/app_thread_noise.py``), and two lanes slowed each other's evaluations. Now each
device gets a long-lived lane process, started on first use: it keeps its own warm
children for its next evaluation and ends when this process closes its stdin (or dies).
One request at a time per process; the lanes (``engine.lanes``) keep one evaluation a
device, so one process a device is the normal case (``ask``).

Candidate code never runs here or in the lane process: the lane starts the evaluator's
sandboxed children as ``launch`` always did.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import json
import logging
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import cudal1_evaluator

log = logging.getLogger(__name__)

Progress = Callable[[str, int, int, str], None]
POLL_S = 0.2  # how often a waiting request looks at its cancel event
CLOSE_WAIT_S = 10.0  # a closing lane's evaluation is cancelled and given this long
warm_children = True  # False: lanes keep no warm children (one-shot commands)


class LaneFailed(RuntimeError):
    """The lane process gave no result: it died, or the evaluator failed in it."""


class LaneProcess:
    """One device's evaluator process, started on the first request and again after a death."""

    def __init__(self, device: str) -> None:
        self.device = device
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._replies: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._stderr: collections.deque[str] = collections.deque(maxlen=40)
        self._next_id = 0

    def ask(self, op: str, job_json: str, on_progress: Progress | None = None,
            cancel: threading.Event | None = None) -> str:
        """The result JSON of ``op`` ("evaluate" or "probe") on ``job_json``."""
        with self._lock:
            proc = self._running()
            self._next_id += 1
            ident = self._next_id
            self._send(proc, {"id": ident, "op": op, "job": job_json})
            return self._await(proc, ident, on_progress, cancel)

    def close(self, wait_s: float = CLOSE_WAIT_S) -> None:
        """End the lane: its stdin closes, a running evaluation is cancelled, warm children go."""
        proc = self._proc
        if proc is None:
            return
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        if wait_s > 0:
            try:
                proc.wait(timeout=wait_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    # -- the process -------------------------------------------------------------------

    def _running(self) -> subprocess.Popen[bytes]:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        self._replies = queue.Queue()
        self._stderr.clear()
        command = [sys.executable, "-m", "cudal1_evaluator", "lane",
                   *([] if warm_children else ["--no-warm"])]
        # its own session: the terminal's Ctrl-C reaches the app, which cancels in order
        self._proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, env=_lane_env(),
                                      start_new_session=True)
        assert self._proc.stdout is not None and self._proc.stderr is not None
        _daemon(self._read_replies, (self._proc.stdout, self._replies), f"lane-{self.device}-out")
        _daemon(self._read_stderr, (self._proc.stderr,), f"lane-{self.device}-err")
        return self._proc

    @staticmethod
    def _read_replies(stream: IO[bytes], replies: queue.Queue[dict[str, Any] | None]) -> None:
        for line in iter(stream.readline, b""):
            with contextlib.suppress(ValueError):
                message = json.loads(line)
                if isinstance(message, dict):
                    replies.put(message)
        replies.put(None)

    def _read_stderr(self, stream: IO[bytes]) -> None:
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip()
            self._stderr.append(line)
            log.warning("evaluator lane %s: %s", self.device, line)

    def _send(self, proc: subprocess.Popen[bytes], message: dict[str, Any]) -> None:
        try:
            assert proc.stdin is not None
            proc.stdin.write(json.dumps(message).encode() + b"\n")
            proc.stdin.flush()
        except (OSError, ValueError) as exc:
            raise LaneFailed(self._died(proc, f"could not be asked ({exc})")) from None

    def _await(self, proc: subprocess.Popen[bytes], ident: int, on_progress: Progress | None,
               cancel: threading.Event | None) -> str:
        cancel_sent = False
        while True:
            try:
                message = self._replies.get(timeout=POLL_S)
            except queue.Empty:
                if cancel is not None and cancel.is_set() and not cancel_sent:
                    self._send(proc, {"id": ident, "op": "cancel"})
                    cancel_sent = True
                continue
            if message is None:
                raise LaneFailed(self._died(proc, "ended"))
            if message.get("id") != ident:
                continue  # a late line of an earlier request
            if "progress" in message:
                if on_progress is not None:
                    stage, done, total, note = message["progress"]
                    on_progress(str(stage), int(done), int(total), str(note))
                continue
            if isinstance(message.get("result"), str):
                return str(message["result"])
            raise LaneFailed(f"the evaluator on {self.device} gave no result: "
                             f"{message.get('error', 'an unreadable reply')}")

    def _died(self, proc: subprocess.Popen[bytes], what: str) -> str:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=2.0)
        code = proc.returncode
        how = "still running" if code is None else \
            f"killed by signal {-code}" if code < 0 else f"exit status {code}"
        tail = " | ".join(list(self._stderr)[-5:]) or "(no output)"
        return (f"the evaluator's process for {self.device} {what} ({how}); it is started "
                f"afresh for the next candidate; its last words: {tail}")


def _daemon(target: Callable[..., None], args: tuple[Any, ...], name: str) -> None:
    threading.Thread(target=target, args=args, name=name, daemon=True).start()


def _lane_env() -> dict[str, str]:
    """This process's environment, with the evaluator importable from where it is here."""
    env = dict(os.environ)
    root = str(Path(cudal1_evaluator.__file__).resolve().parent.parent)
    paths = [root, *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return env


_LANES: dict[str, list[LaneProcess]] = {}
_BUSY: set[int] = set()  # ids of the lane processes answering a request now
_LANES_LOCK = threading.Lock()


def ask(device: str, op: str, job_json: str, on_progress: Progress | None = None,
        cancel: threading.Event | None = None) -> str:
    """``op`` on ``job_json`` in a lane process of ``device`` (``cuda`` and ``cuda:0`` are
    one). Normally one process a device, as one evaluation a device holds its lane at a time;
    a second request while the first runs (slot lanes that place work themselves) gets a
    process of its own, so this layer never serializes what the lanes allow at once."""
    lane = _lease(device)
    try:
        return lane.ask(op, job_json, on_progress, cancel)
    finally:
        with _LANES_LOCK:
            _BUSY.discard(id(lane))


def _lease(device: str) -> LaneProcess:
    from cudal1_tui.engine.lanes import device_key

    key = device_key(device)
    with _LANES_LOCK:
        processes = _LANES.setdefault(key, [])
        lane = next((p for p in processes if id(p) not in _BUSY), None)
        if lane is None:
            lane = LaneProcess(key)
            processes.append(lane)
        _BUSY.add(id(lane))
        return lane


def close_all(wait_s: float = CLOSE_WAIT_S) -> None:
    """End every lane process (the app's exit; ``wait_s=0``: close their pipes and go)."""
    with _LANES_LOCK:
        lanes = [lane for processes in _LANES.values() for lane in processes]
        _LANES.clear()
    for lane in lanes:
        lane.close(wait_s)


atexit.register(close_all)
