"""The parent's view of a child's PID namespace (stdlib only): find every process a
candidate-mode child started, ``setsid`` escapees included, and signal them all.

A child in its own PID namespace (``isolation.namespaces``) is two processes: the one the
parent started (the *outer* one) and its only child, PID 1 of the namespace. Every process of
the namespace descends from that PID 1 (orphans are re-parented to it, never outside), and
shares its ``/proc/<pid>/ns/pid``; nested namespaces a candidate makes are still descendants.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

_MAX_ROUNDS = 64  # a continued process forking while we look is caught on a later round


def _proc_bytes(path: str) -> bytes:
    """A ``/proc`` file's bytes to its end, read with plain system calls: a reading at rest
    sweeps two such files a task, on the clock, and ``pathlib``'s per-call overhead was half
    of a sweep's cost (1 ms for a runner of 40 tasks). Read until a read returns nothing: a
    seq_file hands back whole records per read, under its buffer's size (4092 bytes of a
    ``children`` list, about 680 pids), so a short read is no end (a fresh-eyes review hid
    900 processes past it from every reading). Raises OSError as ``open`` does."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _stat_fields(pid: int) -> list[str]:
    """The fields after the command name (bytes: a candidate names its own processes, and
    a name need not be UTF-8)."""
    try:
        raw = _proc_bytes(f"/proc/{pid}/stat").rsplit(b")", 1)[1]
    except (OSError, IndexError):
        return []
    return raw.decode("ascii", "replace").split()


def _pid_ns(pid: int) -> str:
    """The namespace's identity, "" where it cannot be read: reading the link needs ptrace
    access, which a parent started without root lacks on a child that entered a user
    namespace (gaining capabilities there made it non-dumpable)."""
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return ""


def _ns_pids(pid: int) -> list[str]:
    """The process's pid in each PID namespace from ours down to its own (``NSpid``: the
    status file anyone may read), [] when it has ended."""
    try:
        status = _proc_bytes(f"/proc/{pid}/status").decode("ascii", "replace")
    except OSError:
        return []
    line = next((x for x in status.splitlines() if x.startswith("NSpid:")), "")
    return line.split()[1:]


def _parents() -> dict[int, int]:
    """pid -> parent pid of every process on the host."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat_fields(int(entry))
            if len(fields) > 1 and fields[1].isdigit():
                found[int(entry)] = int(fields[1])
    return found


def _children(pid: int, parents: dict[int, int] | None = None) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
        return [int(p) for p in text.split()]
    except (OSError, ValueError):
        table = _parents() if parents is None else parents
        return [p for p, parent in table.items() if parent == pid]


def namespace_init(outer: int) -> int | None:
    """The host pid of the PID 1 of the child ``outer``'s namespace, or None (no namespace,
    or it has ended). Looked up afresh each time: the outer process has not been reaped, so
    its children are still its own, while a remembered pid could have been reused."""
    depth = len(_ns_pids(outer))
    for pid in _children(outer):
        ns_pids = _ns_pids(pid)
        if depth and len(ns_pids) > depth and ns_pids[-1] == "1":
            return pid
    return None


def namespace_worker(outer: int) -> int | None:
    """The host pid of the child's own work: PID 2 of its namespace (the init's one fork),
    or ``outer`` itself without a namespace; None when it has ended."""
    init = namespace_init(outer)
    if init is None:
        return outer if _ns_pids(outer) else None
    for pid in _children(init):
        if _ns_pids(pid)[-1:] == ["2"]:
            return pid
    return None


def members(outer: int) -> list[int]:
    """Host pids of every process in the namespace of ``outer``'s child (PID 1 first)."""
    init = namespace_init(outer)
    if init is None:
        return []
    parents, ns = _parents(), _pid_ns(init)
    found, frontier = [init], {init}
    while frontier:
        frontier = {p for p, parent in parents.items() if parent in frontier} - set(found)
        found += sorted(frontier)
    if not ns:  # its identity unreadable: the tree alone (every process of it descends)
        return found
    seen = set(found)
    return found + [p for p in parents if p not in seen and _pid_ns(p) == ns]


def signal_all(outer: int, sig: int) -> set[int]:
    """``sig`` to the child's process group and to every process of its namespace, repeated
    until no new one appears (stopped processes cannot fork); the pids signalled."""
    with contextlib.suppress(OSError):
        os.killpg(outer, sig)
    done: set[int] = set()
    for _ in range(_MAX_ROUNDS):
        new = [p for p in members(outer) if p not in done]
        if not new:
            break
        for pid in new:
            with contextlib.suppress(OSError):
                os.kill(pid, sig)
        done.update(new)
    return done


def kill(outer: int) -> None:
    """SIGKILL the namespace's PID 1: the kernel then kills every process in it."""
    init = namespace_init(outer)
    if init is not None:
        with contextlib.suppress(OSError):
            os.kill(init, signal.SIGKILL)


def descendants(init: int) -> list[int]:
    """Host pids below ``init`` (every process of its namespace but itself: orphans are
    re-parented to it), through the ``children`` files: no scan of ``/proc``."""
    found: list[int] = []
    seen: set[int] = set()  # a set: a runner of 900 processes is not swept in quadratic time
    frontier = [init]
    while frontier:
        pid = frontier.pop()
        for task in _tasks(pid):
            try:
                kids = _proc_bytes(f"/proc/{pid}/task/{task}/children").split()
            except OSError:
                continue
            for kid in kids:  # bytes: digits, else skipped
                if kid.isdigit() and int(kid) not in seen:
                    seen.add(int(kid))
                    found.append(int(kid))
                    frontier.append(int(kid))
    return found


def _tasks(pid: int) -> list[str]:
    try:
        return os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []


_TICK_NS = 1_000_000_000 // max(1, os.sysconf("SC_CLK_TCK"))


def _process_clock_ns(pid: int) -> int | None:
    """The process's CPU clock (every thread it ever had, the ones that ended included), ns."""
    try:
        return time.clock_gettime_ns(((~pid) << 3) | 2)  # MAKE_PROCESS_CPUCLOCK(pid, SCHED)
    except OSError:
        return None


def _reaped_children_ns(pid: int) -> int:
    """CPU time of the children ``pid`` has reaped (cutime + cstime: clock ticks)."""
    fields = _stat_fields(pid)
    try:
        return (int(fields[13]) + int(fields[14])) * _TICK_NS
    except (IndexError, ValueError):
        return 0


@dataclass(frozen=True)
class CpuReading:
    """What a namespace's processes have run, and which live tasks it has."""

    ns: int = 0  # CPU time: every process's clock (ended threads included) + reaped children
    tasks: frozenset[tuple[int, str]] = frozenset()  # (pid, tid) of every live task
    stopped: bool = True  # every live task stopped (or traced)
    last_pid: int | None = None  # the namespace's last PID given out (None: no init to ask)
    settled: bool = True  # every live task stopped, none still in the kernel (D)


def at_rest(previous: CpuReading | None, reading: CpuReading) -> bool:
    """``reading`` may be held as what stopped tasks ran: every task stopped and out of the
    kernel, and the sweep before it read the same time and tasks. One sweep reads a
    process's clock before its tasks' states, so a thread still finishing its stop between
    the two reads is seen stopped without its last run; two equal sweeps rule that out."""
    return reading.settled and previous is not None and previous.settled and \
        previous.ns == reading.ns and previous.tasks == reading.tasks


def cpu_ns(pids: list[int], reaper: int | None = None) -> CpuReading:
    """The CPU time ``pids`` have run (ns: each process's CPU clock, threads that ended
    included, and what its reaped children ran) plus what ``reaper`` reaped; their live
    tasks; whether every live task is stopped now. A stopped namespace starts and ends no
    task: a change in ``tasks`` between two readings is a process or thread that ran."""
    total, stopped = _reaped_children_ns(reaper) if reaper is not None else 0, True
    settled = True
    tasks: set[tuple[int, str]] = set()
    for pid in pids:
        clock = _process_clock_ns(pid)
        total += _reaped_children_ns(pid)
        for task in _tasks(pid):
            base = f"/proc/{pid}/task/{task}"
            try:
                if clock is None:
                    total += int(_proc_bytes(f"{base}/schedstat").split()[0])
                state = _proc_bytes(f"{base}/stat").rsplit(b")", 1)[1].split()[0]
            except (OSError, IndexError, ValueError):
                continue
            if state in (b"Z", b"X"):  # ended before: its reaping is no sign of life
                continue
            tasks.add((pid, task))
            stopped = stopped and state in (b"T", b"t", b"D")  # D: in the kernel, stops on return
            settled = settled and state in (b"T", b"t")
        total += clock or 0
    return CpuReading(total, frozenset(tasks), stopped, settled=settled)
