"""File descriptors on the talk sockets (``wire/talk.py``): on CUDA a runner's arena travels
as one, referee -> parent -> that runner (``SCM_RIGHTS``), never as a token a runner could
guess. These run on real socket pairs, without a GPU: a memfd stands for an arena. What they
hold to: a descriptor arrives with its own message; a runner never gets one into the
parent's process; no side takes more than it asked for; and every descriptor received is
closed once used or refused (``/proc/self/fd`` counted before and after)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from cudal1_evaluator.wire.talk import ARENA_FDS, Peer, PeerGone, WithFds, close_fds, serve

ROOT = Path(__file__).resolve().parents[2]


def _open_fds() -> set[int]:
    return {int(name) for name in os.listdir("/proc/self/fd")}


@contextmanager
def _no_fd_left() -> Iterator[None]:
    """Every descriptor opened inside is closed again by the end (sockets included)."""
    before = _open_fds()
    yield
    leaked = _open_fds() - before
    assert not leaked, {fd: os.readlink(f"/proc/self/fd/{fd}") for fd in leaked
                        if os.path.exists(f"/proc/self/fd/{fd}")}


def _arena(text: str) -> int:
    """A stand-in for an arena's descriptor: a memfd holding ``text``."""
    fd = os.memfd_create("arena", os.MFD_CLOEXEC)
    os.write(fd, text.encode())
    return fd


def _read(fd: int) -> str:
    return os.pread(fd, 64, 0).decode()


@contextmanager
def _pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    a, b = socket.socketpair()
    try:
        yield a, b
    finally:
        a.close()
        b.close()


def _serving(sock: socket.socket, handlers: dict[str, Any],
             fd_ops: dict[str, int] | None = None) -> threading.Thread:
    thread = threading.Thread(target=serve, args=(Peer(sock), handlers, lambda e: str(e)),
                              kwargs={"fd_ops": fd_ops}, daemon=True)
    thread.start()
    return thread


def test_an_arena_is_relayed_from_the_referee_to_its_own_runner_and_closed_everywhere(
        ) -> None:
    """The referee lends its arenas' descriptors (it keeps its own); the parent receives
    each with its pool reply and passes it with that runner's attach only; each runner reads
    its own arena, never the other's, and every copy received is closed once used."""
    arenas = {0: _arena("arena of runner 0"), 1: _arena("arena of runner 1")}
    seen: dict[int, list[str]] = {0: [], 1: []}
    after_attach: dict[int, list[int]] = {0: [], 1: []}
    try:
        with _no_fd_left(), _pair() as (ref_parent, ref_child), \
                _pair() as (r0_parent, r0_child), _pair() as (r1_parent, r1_child):
            def pool(msg: dict[str, Any]) -> WithFds:
                runner = int(msg["runner"])
                return WithFds({"slots": [{"arena": 0}]}, [arenas[runner]])

            def runner_attach(index: int) -> Any:
                def attach(msg: dict[str, Any]) -> dict[str, object]:
                    fds = peers[index].fds
                    seen[index] += [_read(fds[d["arena"]]) for d in msg["slots"]]
                    return {}
                return attach

            peers = {0: Peer(r0_child), 1: Peer(r1_child)}
            threads = [_serving(ref_child, {"pool": pool})]
            for index, peer in peers.items():
                threads.append(threading.Thread(
                    target=serve, args=(peer, {"attach": runner_attach(index)}, str),
                    kwargs={"fd_ops": {"attach": ARENA_FDS}}, daemon=True))
                threads[-1].start()
            referee, runners = Peer(ref_parent), {0: Peer(r0_parent), 1: Peer(r1_parent)}
            for _round in range(2):  # a pool made again: the same arena, sent again
                for index in (1, 0):
                    reply = referee.request({"op": "pool", "runner": index},
                                            max_fds=ARENA_FDS)
                    fds = referee.take_fds()
                    assert len(fds) == 1 and _read(fds[0]) == f"arena of runner {index}"
                    try:
                        runners[index].request({"op": "attach", "slots": reply["slots"]},
                                               fds=fds)
                        after_attach[index].append(len(peers[index].fds))
                    finally:
                        close_fds(fds)
            for peer in (referee, *runners.values()):
                peer.send({"op": "finish"})
            for thread in threads:
                thread.join(10)
                assert not thread.is_alive()
        assert seen == {0: ["arena of runner 0"] * 2, 1: ["arena of runner 1"] * 2}
        assert after_attach == {0: [0, 0], 1: [0, 0]}  # closed once the handler returned
        for fd in arenas.values():
            os.fstat(fd)  # the referee's own: lent, never closed by sending
    finally:
        close_fds(list(arenas.values()))


def test_a_runner_sending_descriptors_is_refused_and_none_reaches_the_parent() -> None:
    """Every runner message to the parent allows none: the kernel drops them before they
    reach the parent's table (no room for any), and the message is refused whole."""
    secret = _arena("the runner's")
    try:
        with _pair() as (parent_end, runner_end):
            runner = Peer(runner_end)
            parent = Peer(parent_end)
            with _no_fd_left():
                runner.send({"outputs": []}, [secret, secret])
                watch = _open_fds()
                with pytest.raises(PeerGone, match="file descriptors"):
                    parent.receive(timeout_s=5)
                assert _open_fds() <= watch and parent.fds == []
            with _no_fd_left():  # also in a request's reply
                runner.send({"settings_changed": {}}, [secret])
                with pytest.raises(PeerGone, match="file descriptors"):
                    parent.request({"op": "init"}, timeout_s=5)
            os.fstat(secret)  # the runner's own stays open: only copies travel
    finally:
        os.close(secret)


def test_more_descriptors_than_expected_are_refused_and_all_closed() -> None:
    a, b, c = (_arena(x) for x in "abc")
    try:
        with _pair() as (ours, theirs):
            sender, receiver = Peer(theirs), Peer(ours)
            with _no_fd_left():
                sender.send({"slots": []}, [a, b, c])  # the room for one fits two ints
                with pytest.raises(PeerGone, match="at most 1"):
                    receiver.receive(timeout_s=5, max_fds=1)
                assert receiver.fds == []
            with _no_fd_left():
                sender.send({"slots": []}, [a, b])
                with pytest.raises(PeerGone, match="at most 1"):
                    receiver.receive(timeout_s=5, max_fds=1)
            with _no_fd_left():  # what a line may carry counts over all its chunks
                sender.send({"x": 1}, [a])
                sender.send({"x": 2}, [b])
                assert receiver.receive(timeout_s=5, max_fds=1) == {"x": 1}
                assert _read(receiver.fds[0]) == "a"
                assert receiver.receive(timeout_s=5, max_fds=1) == {"x": 2}
                assert len(receiver.fds) == 1 and _read(receiver.fds[0]) == "b"
                receiver.drop_fds()
    finally:
        close_fds([a, b, c])


def test_descriptors_not_taken_are_closed_at_the_next_message_and_on_an_error_reply(
        ) -> None:
    a = _arena("a")
    try:
        with _pair() as (ours, theirs):
            sender, receiver = Peer(theirs), Peer(ours)
            with _no_fd_left():
                sender.send({"first": True}, [a])
                receiver.receive(timeout_s=5, max_fds=1)
                assert len(receiver.fds) == 1
                sender.send({"second": True})
                receiver.receive(timeout_s=5, max_fds=1)  # the first's are closed now
                assert receiver.fds == []
            with _no_fd_left():
                sender.send({"error": "no pool"}, [a])
                with pytest.raises(PeerGone, match="no pool"):
                    receiver.request({"op": "pool"}, timeout_s=5, max_fds=1)
                assert receiver.fds == []
            with _no_fd_left():  # a line that is no JSON object: refused, closed
                sender.send([1, 2], [a])  # type: ignore[arg-type]
                with pytest.raises(PeerGone, match="JSON object"):
                    receiver.receive(timeout_s=5, max_fds=1)
    finally:
        os.close(a)


def test_a_descriptor_travels_with_a_message_larger_than_the_socket_buffer() -> None:
    """A pool's description may run to megabytes: the descriptor goes with its first byte,
    the rest follows, and it belongs to that message whole."""
    a = _arena("big")
    try:
        with _pair() as (ours, theirs):
            sender, receiver = Peer(theirs), Peer(ours)
            big = {"slots": ["x" * 1000] * 3000}
            with _no_fd_left():
                thread = threading.Thread(target=sender.send, args=(big, [a]))
                thread.start()
                got = receiver.receive(timeout_s=10, max_fds=1)
                thread.join(10)
                assert got == big and len(receiver.fds) == 1 and _read(receiver.fds[0]) == "big"
                receiver.drop_fds()
    finally:
        os.close(a)


def test_serve_refuses_descriptors_with_an_op_that_may_carry_none() -> None:
    a = _arena("a")
    calls: list[str] = []
    try:
        with _no_fd_left(), _pair() as (ours, theirs):
            thread = _serving(theirs, {"trial": lambda m: calls.append("trial") or {},
                                       "attach": lambda m: calls.append("attach") or {}},
                              fd_ops={"attach": 1})
            parent = Peer(ours)
            with pytest.raises(PeerGone, match="may not carry"):
                parent.request({"op": "trial"}, timeout_s=5, fds=[a])
            assert parent.request({"op": "attach"}, timeout_s=5, fds=[a]) == {}
            assert parent.request({"op": "trial"}, timeout_s=5) == {}
            parent.send({"op": "finish"})
            thread.join(10)
        assert calls == ["attach", "trial"]
    finally:
        os.close(a)


RUNNER = """
import json, os, sys
from cudal1_evaluator.wire.talk import Peer, serve

def count():
    return len(os.listdir('/proc/self/fd'))

peer = Peer.from_fd(int(sys.argv[1]))
seen = []

def attach(msg):
    seen.append(os.pread(peer.fds[msg['arena']], 64, 0).decode())
    return {'seen': seen[-1], 'held': count()}

def report(msg):
    return {'seen': seen, 'open': count()}

serve(peer, {'attach': attach, 'report': report}, str, fd_ops={'attach': 1})
"""


def test_a_runner_process_gets_its_arena_and_keeps_no_descriptor_after() -> None:
    """Across processes, as the evaluator runs: the runner reads the arena it was sent, and
    holds no descriptor more once its attach returned."""
    arena = _arena("its arena")
    ours, theirs = socket.socketpair()
    try:
        proc = subprocess.Popen([sys.executable, "-c", RUNNER, str(theirs.fileno())],
                                pass_fds=(theirs.fileno(),), cwd=ROOT)
        theirs.close()
        parent = Peer(ours)
        with _no_fd_left():
            baseline = parent.request({"op": "report"}, timeout_s=60)["open"]
            reply = parent.request({"op": "attach", "arena": 0}, timeout_s=60, fds=[arena])
            assert reply == {"seen": "its arena", "held": baseline + 1}
            assert parent.request({"op": "report"}, timeout_s=60) == {
                "seen": ["its arena"], "open": baseline}
        parent.send({"op": "finish"})
        assert proc.wait(60) == 0
    finally:
        ours.close()
        theirs.close()
        os.close(arena)


def test_a_cuda_description_names_an_arena_only_by_a_descriptor_received() -> None:
    """A slot description holds no handle: only an index into the descriptors that came
    with it. An index past them (or not an int) opens nothing, with no GPU touched."""
    import torch

    from cudal1_evaluator.wire.tensor_exchange import open_shared

    desc: Any = {"kind": "cuda", "device": 0, "arena": 0, "arena_bytes": 2 << 20,
                 "arena_serial": 1, "offset_bytes": 0, "dtype": "float32", "shape": [4]}
    assert "handle" not in json.dumps(desc)
    for fds, index in (((), 0), ((5,), 1), ((5,), -1), ((5,), True), ((5,), "0")):
        with pytest.raises(ValueError, match="descriptor did not come"):
            open_shared({**desc, "arena": index}, torch.device("cuda"), fds)
