"""Each timing lane's evaluations run in a process of its own (``cudal1_evaluator.lane``).

The conductor's clock used to tick in a thread of this process, beside the screen, the model
stream, session writes and the other lanes' conductors: any of them holding the interpreter
lock delayed the clock's wake-ups (a 0.21-0.24 ms call read 16-27 ms beside one busy
thread; ``benchmarks/app_thread_noise.py``). Now each device gets a long-lived lane process,
started on first use: it keeps its own warm children for its next evaluation and ends when
this process closes its channel (or dies). One request at a time per process; the lanes
(``engine.lanes``) keep one evaluation a device, so one process a device is the normal case
(``ask``).

Candidate code never runs here or in the lane process: the lane starts the evaluator's
sandboxed children as ``launch`` always did. The two talk over a Unix socket (not
reopenable through ``/proc``, as a pipe is); once the lane says it is ready (no longer
dumpable) it gets a key made here, and every line after that is sealed with it
(``cudal1_evaluator.lane.seal``): a line that does not open is another process's, and the
lane is killed rather than believed. A lane that cannot be started or asked, that answers
with an error, or that dies while it works is ``LaneFailed``: the engine reports it and
records no verdict (an infrastructure failure is no candidate's reward); the next request
starts a fresh lane.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import json
import logging
import os
import queue
import site
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import cudal1_evaluator
from cudal1_evaluator.isolation import lifetime
from cudal1_evaluator.isolation.child_env import is_secret
from cudal1_evaluator.lane import not_dumpable, seal, unseal
from cudal1_tui.errors import Cudal1Error

log = logging.getLogger(__name__)

Progress = Callable[[str, int, int, str], None]
POLL_S = 0.2  # how often a waiting request looks at its cancel event
CLOSE_WAIT_S = 10.0  # a closing lane's evaluation is cancelled and given this long
CANCEL_WAIT_S = 60.0  # a cancelled request not answered by then: the lane is killed
READY_WAIT_S = 120.0  # a lane that has not said it is ready by then (its imports) is killed
SEND_WAIT_S = 30.0  # a request or cancel the lane does not take in by then fails
GONE_WAIT_S = 2.0  # a lane found dead: its last lines are waited for this long
warm_children = True  # False: lanes keep no warm children (one-shot commands)
FIX = "`cudal1-tui doctor` checks the evaluator's interpreter; the app's log has the lane's stderr"


class LaneFailed(Cudal1Error):
    """The lane process gave no result: it could not be started or asked, the evaluator
    failed in it, or it died while it worked."""

    def __init__(self, message: str) -> None:
        super().__init__(message, fix=FIX)


class LaneProcess:
    """One device's evaluator process, started on the first request and again after a death."""

    def __init__(self, device: str, command: list[str] | None = None) -> None:
        self.device = device
        self._command = command  # None: ``python -m cudal1_evaluator lane`` (tests: a stand-in)
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._channel: socket.socket | None = None
        self._replies: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._stderr: collections.deque[str] = collections.deque(maxlen=40)
        self._next_id = 0
        self._key = b""
        self._why_ended = ""  # what this side did to end it (a deadline, a foreign line)

    def ask(self, op: str, job_json: str, on_progress: Progress | None = None,
            cancel: threading.Event | None = None, silence_s: float | None = None) -> str:
        """The result JSON of ``op`` ("evaluate" or "probe") on ``job_json``; a lane silent
        (no progress, no result) for ``silence_s`` is killed."""
        with self._lock:
            proc = self._running()
            self._next_id += 1
            ident = self._next_id
            self._send(proc, {"id": ident, "op": op, "job": job_json})
            return self._await(proc, ident, on_progress, cancel, silence_s)

    def close(self, wait_s: float = CLOSE_WAIT_S) -> None:
        """End the lane: its channel closes, a running evaluation is cancelled, warm children go."""
        proc, channel = self._proc, self._channel
        if proc is None or channel is None:
            return
        with contextlib.suppress(OSError):
            channel.shutdown(socket.SHUT_WR)  # the lane reads the end of its requests
        if wait_s > 0:
            try:
                proc.wait(timeout=wait_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            channel.close()

    # -- the process -------------------------------------------------------------------

    def _running(self) -> subprocess.Popen[bytes]:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        if self._proc is not None:  # a lane of ours has ended: sweep what its children left
            with contextlib.suppress(OSError):
                lifetime.sweep_stale([])  # in /tmp and /dev/shm (dead owners' dirs only)
        not_dumpable()  # the keys this process makes stay out of other processes' reach
        if self._channel is not None:
            self._channel.close()
        self._replies, self._why_ended = queue.Queue(), ""
        self._stderr.clear()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        command = self._command or [sys.executable, "-m", "cudal1_evaluator", "lane",
                                    *([] if warm_children else ["--no-warm"])]
        try:  # its own session: the terminal's Ctrl-C reaches the app, which cancels in order
            proc = subprocess.Popen(command, stdin=theirs.fileno(), stdout=theirs.fileno(),
                                    stderr=subprocess.PIPE, env=_lane_env(),
                                    start_new_session=True)
        except OSError as exc:
            ours.close()
            raise LaneFailed(f"the evaluator's process for {self.device} could not start: "
                             f"{exc}") from None
        finally:
            theirs.close()
        self._proc, self._channel = proc, ours
        assert proc.stderr is not None
        _daemon(self._read_stderr, (proc.stderr,), f"lane-{self.device}-err")
        self._key = self._handshake(proc, ours)
        _daemon(self._read_replies, (proc, ours.makefile("rb"), self._replies, self._key),
                f"lane-{self.device}-out")
        return proc

    def _handshake(self, proc: subprocess.Popen[bytes], channel: socket.socket) -> bytes:
        """Wait for the lane to say it is ready (not dumpable by then), then give it a key:
        the key never waits in a channel of a process whose /proc is open to others."""
        channel.settimeout(READY_WAIT_S)
        try:
            first = channel.recv(64)
            if not first.startswith(b'{"ready": true}'):
                raise OSError(f"it said {first[:40]!r} before anything else")
            key = os.urandom(32)
            channel.settimeout(None)
            # a lane that stops reading fails a send after this long, never blocks it
            channel.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO,
                               struct.pack("ll", int(SEND_WAIT_S), 0))
            channel.sendall(json.dumps({"key": key.hex()}).encode() + b"\n")
        except OSError as exc:
            proc.kill()
            channel.close()
            raise LaneFailed(self._died(proc, f"did not start ({exc})")) from None
        return key

    def _read_replies(self, proc: subprocess.Popen[bytes], stream: IO[bytes],
                      replies: queue.Queue[dict[str, Any] | None], key: bytes) -> None:
        try:
            for line in iter(stream.readline, b""):
                message = unseal(key, line)
                if message is None:
                    self._why_ended = (f"was killed: a line of {len(line)} bytes on its "
                                       "channel that it did not seal (another process wrote "
                                       "into it)")
                    proc.kill()
                    break
                replies.put(message)
        except (OSError, ValueError):  # a socket whose peer died with our lines unread
            self._why_ended = self._why_ended or "closed its channel (connection reset)"
        finally:
            replies.put(None)

    def _read_stderr(self, stream: IO[bytes]) -> None:
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip()
            self._stderr.append(line)
            log.warning("evaluator lane %s: %s", self.device, line)

    def _send(self, proc: subprocess.Popen[bytes], message: dict[str, Any]) -> None:
        try:
            assert self._channel is not None
            self._channel.sendall(seal(self._key, message))
        except (OSError, AssertionError) as exc:
            raise LaneFailed(self._died(proc, f"could not be asked ({exc})")) from None

    def _await(self, proc: subprocess.Popen[bytes], ident: int, on_progress: Progress | None,
               cancel: threading.Event | None, silence_s: float | None) -> str:
        answered = False
        cancelled_at: float | None = None
        heard = time.monotonic()
        try:
            while True:
                if cancel is not None and cancel.is_set() and cancelled_at is None:
                    self._send(proc, {"id": ident, "op": "cancel"})
                    cancelled_at = time.monotonic()
                self._kill_if_late(proc, cancelled_at, silence_s, heard)
                try:
                    message = self._replies.get(timeout=POLL_S)
                except queue.Empty:
                    continue
                heard = time.monotonic()
                if message is None:
                    raise self._ended(proc)
                if message.get("id") != ident:
                    continue  # a late line of an earlier request
                if "progress" in message:
                    _tell(on_progress, message["progress"])
                    continue
                answered = True
                if isinstance(message.get("result"), str):
                    return str(message["result"])
                raise LaneFailed(f"the evaluator on {self.device} gave no result: "
                                 f"{message.get('error', 'an unreadable reply')}")
        finally:
            if not answered and cancelled_at is None and proc.poll() is None:
                with contextlib.suppress(LaneFailed):  # we leave: the lane must stop too
                    self._send(proc, {"id": ident, "op": "cancel"})

    def _kill_if_late(self, proc: subprocess.Popen[bytes], cancelled_at: float | None,
                      silence_s: float | None, heard: float) -> None:
        """A lane that ignores a cancel, or is silent longer than the request allows, is
        killed; once it is gone and its reader has said nothing more, the request fails."""
        now = time.monotonic()
        if proc.poll() is not None:
            if now - heard > GONE_WAIT_S:
                raise self._ended(proc)
            return
        if cancelled_at is not None and now - cancelled_at > CANCEL_WAIT_S:
            self._why_ended = f"did not stop within {CANCEL_WAIT_S:g} s of a cancel; killed"
        elif silence_s is not None and now - heard > silence_s:
            self._why_ended = f"said nothing for {silence_s:g} s; killed"
        else:
            return
        proc.kill()

    def _ended(self, proc: subprocess.Popen[bytes]) -> LaneFailed:
        return LaneFailed(self._died(proc, self._why_ended or "ended while it worked"))

    def _died(self, proc: subprocess.Popen[bytes], what: str) -> str:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=2.0)
        code = proc.returncode
        how = "still running" if code is None else \
            f"killed by signal {-code}" if code < 0 else f"exit status {code}"
        tail = " | ".join(list(self._stderr)[-5:]) or "(no output)"
        return (f"the evaluator's process for {self.device} {what} ({how}); it is started "
                f"afresh for the next candidate; its last words: {tail}")


def _tell(on_progress: Progress | None, event: object) -> None:
    """A progress event to the caller; a broken callback is logged, never the request's end."""
    if on_progress is None or not isinstance(event, list) or len(event) != 4:
        return
    stage, done, total, note = event
    try:
        on_progress(str(stage), int(done), int(total), str(note))
    except Exception:
        log.exception("a progress callback failed")


def _daemon(target: Callable[..., None], args: tuple[Any, ...], name: str) -> None:
    threading.Thread(target=target, args=args, name=name, daemon=True).start()


def _lane_env() -> dict[str, str]:
    """This process's environment without its secrets (the lane needs none), with the
    evaluator importable from where it is here (a source checkout; an installed package
    needs nothing: its site-packages is on the lane's path already)."""
    env = {name: value for name, value in os.environ.items() if not is_secret(name)}
    root = str(Path(cudal1_evaluator.__file__).resolve().parent.parent)
    installed = {str(Path(p).resolve()) for p in
                 (*site.getsitepackages(), site.getusersitepackages())}
    if root not in installed:
        paths = [root, *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return env


_LANES: dict[str, list[LaneProcess]] = {}
_BUSY: set[int] = set()  # ids of the lane processes answering a request now
_LANES_LOCK = threading.Lock()


def ask(device: str, op: str, job_json: str, on_progress: Progress | None = None,
        cancel: threading.Event | None = None, silence_s: float | None = None) -> str:
    """``op`` on ``job_json`` in a lane process of ``device`` (``cuda`` and ``cuda:0`` are
    one). Normally one process a device, as one evaluation a device holds its lane at a time;
    a second request while the first runs (slot lanes that place work themselves) gets a
    process of its own, so this layer never serializes what the lanes allow at once."""
    lane = _lease(device)
    try:
        return lane.ask(op, job_json, on_progress, cancel, silence_s)
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
    """End every lane process (the app's exit; ``wait_s=0``: end their channels and go)."""
    with _LANES_LOCK:
        lanes = [lane for processes in _LANES.values() for lane in processes]
        _LANES.clear()
    for lane in lanes:
        lane.close(wait_s)


atexit.register(close_all)
