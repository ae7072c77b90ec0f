"""What a per-call release of a window's inputs would cost on a CPU (security.md, Known limits,
"A window's later inputs are visible at its first call"): a runner process rings a doorbell
word in a shared page after each call, a trusted process sees it, copies the next input set
into the next slot and rings back. Prints, per set size, the round trip of the doorbell
alone (median and p90, µs) and the copy's time (median, ms).

``--mode memfd`` measures the design a review settled on instead (security.md, Known limits):
each set in a fresh memfd, written by the trusted side, its descriptor sent over a socket
pair (``SCM_RIGHTS``), mapped by the runner (``MAP_POPULATE``), the runner's doorbell an
eventfd both sides block on: per call, the write, the hand-over and mapping, and the round
trip, each a median (ms).

    python benchmarks/doorbell_latency.py [--calls 2000] [--sizes 16K,1M,16M] [--mode memfd]
"""

from __future__ import annotations

import argparse
import mmap
import os
import socket
import statistics
import struct
import time

WORD = struct.Struct("<Q")


def _parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def _runner(page: mmap.mmap, calls: int) -> None:
    """Wait for release j, 'call' (nothing), ring done j+1."""
    for j in range(calls):
        while WORD.unpack_from(page, 0)[0] < j:
            pass
        WORD.pack_into(page, 8, j + 1)
    os._exit(0)


def _trusted(page: mmap.mmap, calls: int, staging: bytes, slot: mmap.mmap | None,
             ) -> tuple[list[float], list[float]]:
    trips, copies = [], []
    released = time.perf_counter_ns()
    for j in range(calls):
        while WORD.unpack_from(page, 8)[0] < j + 1:
            pass
        rang = time.perf_counter_ns()
        trips.append((rang - released) / 1e3)
        if slot is not None:
            slot[:len(staging)] = staging
            copies.append((time.perf_counter_ns() - rang) / 1e6)
        released = time.perf_counter_ns()
        WORD.pack_into(page, 0, j + 1)
    return trips, copies


def _calls_for(size: int, calls: int, least: int) -> int:
    """Fewer calls for sets of 16 MB and more, whose copies take milliseconds each."""
    return calls if size < (16 << 20) else max(least, calls // 40)


def measure(calls: int, size: int) -> tuple[float, float, float]:
    page = mmap.mmap(-1, mmap.PAGESIZE)
    slot = mmap.mmap(-1, size) if size else None
    pid = os.fork()
    if pid == 0:
        _runner(page, calls)
    trips, copies = _trusted(page, calls, os.urandom(size), slot)
    os.waitpid(pid, 0)
    trips.sort()
    return (statistics.median(trips), trips[int(0.9 * len(trips))],
            statistics.median(copies) if copies else 0.0)


def _memfd_runner(sock: socket.socket, ring: int, calls: int, size: int) -> None:
    """Per call: take the set's descriptor, map it populated, read one word, ring."""
    for _ in range(calls):
        _, fds, _, _ = socket.recv_fds(sock, 16, 1)
        view = mmap.mmap(fds[0], size, mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0),
                         mmap.PROT_READ)
        WORD.unpack_from(view, size - 8)
        view.close()
        os.close(fds[0])
        os.eventfd_write(ring, 1)
    os._exit(0)


def measure_memfd(calls: int, size: int, staging: bytes) -> tuple[float, float]:
    """Medians, ms: the set written into a fresh memfd, and its hand-over to the runner's
    ring (descriptor sent, mapped, rung)."""
    here, there = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    ring = os.eventfd(0)
    pid = os.fork()
    if pid == 0:
        here.close()
        _memfd_runner(there, ring, calls, size)
    there.close()
    writes, handovers = [], []
    for _ in range(calls):
        started = time.perf_counter_ns()
        fd = os.memfd_create("set", os.MFD_CLOEXEC)
        os.ftruncate(fd, size)
        os.pwrite(fd, staging, 0)
        written = time.perf_counter_ns()
        socket.send_fds(here, [b"s"], [fd])
        os.eventfd_read(ring)
        handovers.append((time.perf_counter_ns() - written) / 1e6)
        writes.append((written - started) / 1e6)
        os.close(fd)
    os.waitpid(pid, 0)
    here.close()
    os.close(ring)
    return statistics.median(writes), statistics.median(handovers)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--sizes", default="0,16K,1M,16M,64M")
    parser.add_argument("--mode", choices=("spin", "memfd"), default="spin")
    args = parser.parse_args()
    if args.mode == "memfd":
        _memfd_table(args)
        return
    print(f"{os.cpu_count()} CPUs; {args.calls} calls a size; spin on both sides")
    print("| set | round trip, µs (median) | p90 | copy, ms (median) |")
    print("| --- | --- | --- | --- |")
    for text in args.sizes.split(","):
        size = _parse_size(text)
        median, p90, copy = measure(_calls_for(size, args.calls, 50), size)
        print(f"| {text} | {median:.1f} | {p90:.1f} | {copy:.3f} |")


def _memfd_table(args: argparse.Namespace) -> None:
    print(f"{os.cpu_count()} CPUs; a fresh memfd a set, eventfd doorbell (blocking)")
    print("| set | write, ms | hand-over + map + ring, ms |")
    print("| --- | --- | --- |")
    for text in args.sizes.split(","):
        size = max(_parse_size(text), mmap.PAGESIZE)  # a memfd maps a page at least
        write, handover = measure_memfd(_calls_for(size, args.calls, 30), size,
                                        os.urandom(size))
        label = text if size == _parse_size(text) else f"{text} (a page)"
        print(f"| {label} | {write:.3f} | {handover:.3f} |")


if __name__ == "__main__":
    main()
