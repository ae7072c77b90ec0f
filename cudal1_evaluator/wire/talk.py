"""The narrow protocol between the trusted parent and its two children (stdlib only).

One JSON object per line over a socket pair made by ``sandbox.Child(talk=True)``. The parent
sends requests (``{"op": ...}``) and reads one reply per request. Replies from the worker (the
candidate's process) are untrusted data: size-limited, parsed as JSON (never pickle) and checked
field by field with the ``read_*`` helpers below before anything uses them.

Requests to the referee (trusted, never loads candidate code, times nothing):
    init {init_seed, probe_seed}           -> {device, versions, tolerance, outputs, set_bytes}
    pool {runner, calls, xdir}             -> {slots: [{inputs, outputs}]}  (made once)
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
    attach {slots}                         -> {}   (opens its pool once)
    trial {values}                         -> {outputs: [meta, meta], settings_changed}
    burst {values}                         -> {}   (one timed window: slots 0..N-1)
    describe {}                            -> {outputs: [meta...]}  (after the seal)
Both: finish {} -> the child sends its final report on the result pipe and exits.
"""

from __future__ import annotations

import json
import select
import socket
import time
from collections.abc import Callable, Mapping
from typing import Any, cast

from cudal1_evaluator.wire.talk_messages import OutputMeta

MAX_LINE = 32 * 2**20
Alive = Callable[[], bool]
Reply = dict[str, Any]  # a JSON object as received: its fields are read and checked one by one


class PeerGone(Exception):
    """The other side closed, timed out, or sent something that is not a valid reply."""


class Peer:
    """One end of a talk socket: requests out, replies in (or the reverse in a child)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._buf = bytearray()

    @classmethod
    def from_fd(cls, fd: int) -> Peer:
        return cls(socket.socket(fileno=fd))

    def send(self, message: Mapping[str, object]) -> None:
        data = (json.dumps(message, allow_nan=True) + "\n").encode("utf-8")
        try:
            self.sock.sendall(data)
        except OSError as exc:
            raise PeerGone(f"the other process is gone ({exc.strerror or exc})") from None

    def receive(self, timeout_s: float | None = None,
                alive: Alive | None = None) -> dict[str, Any]:  # JSON: read field by field
        """The next message; ``alive()`` (optional) is polled so a dead child ends the wait."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while b"\n" not in self._buf:
            if len(self._buf) > MAX_LINE:
                raise PeerGone("a reply longer than the protocol allows")
            left = 0.5 if deadline is None else min(0.5, deadline - time.monotonic())
            if left <= 0:
                raise PeerGone("no reply in time")
            ready, _, _ = select.select([self.sock], [], [], left)
            if not ready:
                if alive is not None and not alive():
                    raise PeerGone("the process ended without replying")
                continue
            try:
                chunk = self.sock.recv(1 << 20)
            except OSError as exc:
                raise PeerGone(f"the connection failed ({exc.strerror or exc})") from None
            if not chunk:
                raise PeerGone("the process closed the connection")
            self._buf.extend(chunk)
        line, _, rest = bytes(self._buf).partition(b"\n")
        self._buf = bytearray(rest)
        try:
            message = json.loads(line)
        except ValueError:
            raise PeerGone("a reply that is not JSON") from None
        if not isinstance(message, dict):
            raise PeerGone("a reply that is not a JSON object")
        return message

    def request(self, message: Mapping[str, object], timeout_s: float | None = None,
                alive: Alive | None = None) -> Reply:
        self.send(message)
        reply = self.receive(timeout_s, alive)
        if reply.get("error"):
            raise PeerGone(str(reply["error"])[:4000])
        return reply


def read_metas(value: Any, count: int) -> list[OutputMeta]:
    """Output descriptions as a runner claims them (used for messages, never for a pass):
    objects, each read with ``.get``; anything else counts as an empty description."""
    if not isinstance(value, list) or len(value) != count:
        raise PeerGone(f"expected {count} output descriptions")
    return [cast(OutputMeta, item) if isinstance(item, dict) else OutputMeta() for item in value]



# A handler takes its op's request (a TypedDict of wire.talk_messages; JSON from the trusted parent)
Handler = Callable[[Any], Mapping[str, object]]


def serve(peer: Peer, handlers: Mapping[str, Handler],
          on_error: Callable[[BaseException], str | None]) -> None:
    """A child's loop: one reply per request until ``finish`` (or the parent goes away).
    ``on_error(exc)`` turns an exception into the error reply (and may record it)."""
    while True:
        try:
            message = peer.receive()
        except PeerGone:
            return
        op = message.get("op")
        if op == "finish":
            return
        handler = handlers.get(str(op))
        reply: Mapping[str, object]
        try:
            reply = handler(message) if handler is not None else {"error": f"unknown op {op!r}"}
        except BaseException as exc:  # the reply says what went wrong; the loop goes on
            reply = {"error": on_error(exc) or type(exc).__name__}
        try:
            peer.send(reply)
        except PeerGone:
            return
