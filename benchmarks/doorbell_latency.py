"""What a per-call release of a window's inputs would cost on a CPU (security.md, Known limits,
"A window's later inputs are visible at its first call"): a runner process rings a doorbell
word in a shared page after each call, a trusted process sees it, copies the next input set
into the next slot and rings back. Prints, per set size, the round trip of the doorbell
alone (median and p90, µs) and the copy's time (median, ms): the round trip is what every
call would pay on the clock, the copy what would stay off it.

    python benchmarks/doorbell_latency.py [--calls 2000] [--sizes 16K,1M,16M]
"""

from __future__ import annotations

import argparse
import mmap
import os
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


def measure(calls: int, size: int) -> tuple[float, float, float]:
    page = mmap.mmap(-1, mmap.PAGESIZE)
    slot = mmap.mmap(-1, size) if size else None
    staging = os.urandom(min(size, 1 << 20)) * max(1, size // (1 << 20)) if size else b""
    pid = os.fork()
    if pid == 0:
        _runner(page, calls)
    trips, copies = _trusted(page, calls, staging[:size], slot)
    os.waitpid(pid, 0)
    trips.sort()
    return (statistics.median(trips), trips[int(0.9 * len(trips))],
            statistics.median(copies) if copies else 0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--sizes", default="0,16K,1M,16M,64M")
    args = parser.parse_args()
    print(f"{os.cpu_count()} CPUs; {args.calls} calls a size; spin on both sides")
    print("| set | round trip, µs (median) | p90 | copy, ms (median) |")
    print("| --- | --- | --- | --- |")
    for text in args.sizes.split(","):
        size = _parse_size(text)
        calls = args.calls if size < (16 << 20) else max(50, args.calls // 40)
        median, p90, copy = measure(calls, size)
        print(f"| {text} | {median:.1f} | {p90:.1f} | {copy:.3f} |")


if __name__ == "__main__":
    main()
