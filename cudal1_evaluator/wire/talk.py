"""The narrow protocol between the trusted parent and its two children (stdlib only).

One JSON object per line over a socket pair made by ``sandbox.Child(talk=True)``. The parent
sends requests (``{"op": ...}``) and reads one reply per request. Replies from the worker (the
candidate's process) are untrusted data: size-limited, parsed as JSON (never pickle) and checked
field by field with the ``read_*`` helpers below before anything uses them.

Requests to the referee (trusted, never loads candidate code, times nothing):
    init {init_seed, probe_seed}           -> {device, versions, tolerance, outputs, set_bytes}
    pool {runner, calls, xdir}             -> {slots: [{inputs, outputs}]}  (made once; on
                                              CUDA with the runner's arena as a descriptor)
    prepare {sets: [{id, seed}]}           -> {}   (fresh input sets, kept by the referee)
    stage {runner, sets}                   -> {values}  (GPU: the sets laid out as its slots,
                                              in the referee's own memory, before the clock)
    fill {runner, sets, flush?}            -> {values}  (sets into the runner's slots, in order:
                                              the staged ones in one copy; then the flush)
    flush {}                               -> {}   (caches evicted before a window)
    seal {runner, handles, sampled}        -> {in_place, copied, map_error, mapped}  (the
                                              drawn calls' outputs sampled: window closed)
    place {runner, handles, where}         -> {}   (every output placed, after the clock)
    idle {}                                -> {ms} (a tiny kernel's round trip: GPU busy?)
    expect {sets}                          -> {}   (the strict reference outputs)
    check {runner, sets}                   -> {results: [{ok, abs, rel, message, mutated}]}
    release {sets}                         -> {}
Requests to a runner (the candidate's process, or the reference's sibling):
    init {init_seed, outputs, single}      -> {settings_changed} after build and lock-down
    attach {slots} + its arena's descriptor -> {}  (opens its pool once)
    trial {values}                         -> {outputs: [meta, meta], settings_changed}
    burst {values}                         -> {}   (one timed window: slots 0..N-1)
    describe {}                            -> {outputs: [meta...]}  (after the seal)
Both: finish {} -> the child sends its final report on the result pipe and exits.

File descriptors: on CUDA the referee's ``pool`` reply carries one, its runner's arena (a VMM
allocation exported as a POSIX file descriptor, ``wire/cuda_ipc.py``), with ``SCM_RIGHTS``
on the same socket; the parent relays it, with the ``attach`` request, to that runner and no
other, and the slot descriptions name it by its index among the descriptors that came with
the message (``SharedCuda.arena``): nothing a runner holds names memory it was not handed.
A ``Peer`` accepts descriptors only where the receiver asks for them, at most as many as it
asks for (``max_fds``); a message with more, or with any where none are due (every message a
runner sends the parent), is refused whole and whatever arrived is closed. The descriptors
that came with a message are the receiver's to close (``take_fds``); any it did not take are
closed at its next ``receive`` (``serve`` closes them once the handler returned). A sender
only lends its own: the kernel passes copies.
"""

from __future__ import annotations

import array
import contextlib
import json
import os
import select
import socket
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, cast

from cudal1_evaluator.wire.talk_messages import OutputMeta

MAX_LINE = 32 * 2**20
Alive = Callable[[], bool]
Reply = dict[str, Any]  # a JSON object as received: its fields are read and checked one by one
_FD_BYTES = array.array("i").itemsize
WINDOW_POLL_S = 0.01  # on a GPU, a window's waits for the next message poll this long first
SET_FDS = 1  # descriptors a burst request carries at most: its one call's input set
ARENA_FDS = 1  # descriptors a pool reply, and the attach that relays it, carry at most


class PeerGone(Exception):
    """The other side closed, timed out, or sent something that is not a valid reply."""


class WithFds(dict[str, object]):
    """A reply and the file descriptors sent with it (a handler's answer in ``serve``). The
    descriptors are lent: the sender still owns its own and closes them when it likes, or
    (``given``) ``serve`` closes them once sent."""

    def __init__(self, message: Mapping[str, object], fds: Sequence[int],
                 given: bool = False) -> None:
        super().__init__(message)
        self.fds = tuple(fds)
        self.given = given


def close_fds(fds: Collection[int]) -> None:
    """Close each descriptor (one already closed is no error: closing is all that is left)."""
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


class Peer:
    """One end of a talk socket: requests out, replies in (or the reverse in a child).
    ``max_fds``: the most descriptors one message from the other side may carry where
    ``receive`` is not told otherwise (0: none, every message with one is refused)."""

    def __init__(self, sock: socket.socket, max_fds: int = 0) -> None:
        self.sock = sock
        self.max_fds = max_fds
        self._buf = bytearray()
        self._pending: list[int] = []  # descriptors received with the line being assembled
        self.fds: list[int] = []  # those of the last message received, until taken or dropped
        self.spin_s = 0.0  # each wait polls this long before it sleeps (``receive``)

    @classmethod
    def from_fd(cls, fd: int, max_fds: int = 0) -> Peer:
        return cls(socket.socket(fileno=fd), max_fds)

    def send(self, message: Mapping[str, object], fds: Sequence[int] = ()) -> None:
        """One message; ``fds`` (lent, still the caller's) travel with its first byte."""
        data = (json.dumps(message, allow_nan=True) + "\n").encode("utf-8")
        try:
            if fds:
                rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))]
                sent = self.sock.sendmsg([data], rights)
                data = data[sent:]
            if data:
                self.sock.sendall(data)
        except OSError as exc:
            raise PeerGone(f"the other process is gone ({exc.strerror or exc})") from None

    def take_fds(self) -> list[int]:
        """The descriptors of the last message received: the caller's now, to close."""
        fds, self.fds = self.fds, []
        return fds

    def drop_fds(self) -> None:
        """Close the descriptors of the last message received that nobody took."""
        close_fds(self.take_fds())

    def receive(self, timeout_s: float | None = None, alive: Alive | None = None,
                max_fds: int | None = None) -> dict[str, Any]:  # JSON: read field by field
        """The next message; ``alive()`` (optional) is polled so a dead child ends the wait.
        The descriptors it carried (at most ``max_fds``, else ``self.max_fds``) are in
        ``fds`` until taken; those of the message before, if not taken, are closed now."""
        self.drop_fds()
        allowed = self.max_fds if max_fds is None else max_fds
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        try:
            while b"\n" not in self._buf:
                if len(self._buf) > MAX_LINE:
                    raise PeerGone("a reply longer than the protocol allows")
                left = 0.5 if deadline is None else min(0.5, deadline - time.monotonic())
                if left <= 0:
                    raise PeerGone("no reply in time")
                ready = self._spin() or select.select([self.sock], [], [], left)[0]
                if not ready:
                    if alive is not None and not alive():
                        raise PeerGone("the process ended without replying")
                    continue
                chunk = self._recv(allowed)
                if not chunk:
                    raise PeerGone("the process closed the connection")
                self._buf.extend(chunk)
        except BaseException:
            close_fds(self._pending)
            self._pending = []
            raise
        line, _, rest = bytes(self._buf).partition(b"\n")
        self._buf = bytearray(rest)
        fds, self._pending = self._pending, []
        try:
            message = json.loads(line)
        except ValueError:
            close_fds(fds)
            raise PeerGone("a reply that is not JSON") from None
        if not isinstance(message, dict):
            close_fds(fds)
            raise PeerGone("a reply that is not a JSON object")
        self.fds = fds
        return message

    def _spin(self) -> bool:
        """Whether the socket became readable while polled for ``spin_s`` (0: not polled).
        A process woken from sleep takes 0.1-0.7 ms on an idle GPU host (measured on an
        H200 host, 2026-11-30): a window's per-call round trips poll instead."""
        until = time.perf_counter() + self.spin_s
        while self.spin_s > 0 and time.perf_counter() < until:
            if select.select([self.sock], [], [], 0)[0]:
                return True
        return False

    def _recv(self, allowed: int) -> bytes:
        """One chunk; the descriptors that came with it join ``_pending`` (the line being
        assembled), unless they are more than ``allowed`` there: then every one is closed
        and the message refused. With none allowed there is no room for any, and the kernel
        closes them itself (none reaches this process's table; ``MSG_CTRUNC`` says so)."""
        room = socket.CMSG_SPACE(allowed * _FD_BYTES) if allowed > 0 else 0
        try:
            chunk, ancillary, flags, _addr = self.sock.recvmsg(1 << 20, room,
                                                               socket.MSG_CMSG_CLOEXEC)
        except OSError as exc:
            raise PeerGone(f"the connection failed ({exc.strerror or exc})") from None
        for level, kind, data in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                got = array.array("i")
                got.frombytes(data[:len(data) - len(data) % _FD_BYTES])
                self._pending.extend(got)
        if flags & socket.MSG_CTRUNC or len(self._pending) > allowed:
            raise PeerGone("a message carrying file descriptors the protocol does not allow "
                           f"there (at most {allowed})")
        return chunk

    def request(self, message: Mapping[str, object], timeout_s: float | None = None,
                alive: Alive | None = None, *, fds: Sequence[int] = (),
                max_fds: int = 0) -> Reply:
        """``message`` (with ``fds``, lent) out, its reply in. The reply may carry at most
        ``max_fds`` descriptors (``take_fds``); an error reply's are closed."""
        self.send(message, fds)
        reply = self.receive(timeout_s, alive, max_fds)
        if reply.get("error"):
            self.drop_fds()
            raise PeerGone(str(reply["error"])[:4000])
        return reply


def read_metas(value: Any, count: int) -> list[OutputMeta]:
    """Output descriptions as a runner claims them (used for messages, never for a pass):
    objects, each read with ``.get``; anything else counts as an empty description."""
    if not isinstance(value, list) or len(value) != count:
        raise PeerGone(f"expected {count} output descriptions")
    return [cast(OutputMeta, item) if isinstance(item, dict) else OutputMeta() for item in value]



# A handler takes its op's request (a TypedDict of wire.talk_messages; JSON from the trusted parent)
# and gives the reply (a ``WithFds`` where descriptors go with it)
Handler = Callable[[Any], Mapping[str, object]]


def serve(peer: Peer, handlers: Mapping[str, Handler],
          on_error: Callable[[BaseException], str | None],
          fd_ops: Mapping[str, int] | None = None) -> None:
    """A child's loop: one reply per request until ``finish`` (or the parent goes away).
    ``on_error(exc)`` turns an exception into the error reply (and may record it).
    ``fd_ops``: the ops whose request may carry descriptors, and how many; a handler reads
    them in ``peer.fds`` and they are closed once it returned (a handler that keeps one
    takes it: ``take_fds``). A request with descriptors it may not carry gets an error."""
    allowed = dict(fd_ops or {})
    peer.max_fds = max(allowed.values(), default=0)
    while True:
        try:
            message = peer.receive()
        except PeerGone:
            return
        op = message.get("op")
        if op == "finish":
            peer.drop_fds()
            return
        handler = handlers.get(str(op))
        reply: Mapping[str, object]
        try:
            if len(peer.fds) > allowed.get(str(op), 0):
                reply = {"error": f"{op!r} carried file descriptors it may not carry"}
            else:
                reply = handler(message) if handler is not None else \
                    {"error": f"unknown op {op!r}"}
        except BaseException as exc:  # the reply says what went wrong; the loop goes on
            reply = {"error": on_error(exc) or type(exc).__name__}
        finally:
            peer.drop_fds()
        try:
            if isinstance(reply, WithFds) and reply.fds:
                try:
                    peer.send(reply, reply.fds)
                finally:
                    if reply.given:
                        close_fds(reply.fds)
            else:
                peer.send(reply)
        except PeerGone:
            return
