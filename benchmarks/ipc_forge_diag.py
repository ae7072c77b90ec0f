"""Can a driver IPC handle be forged? The open question of ``docs/security.md`` (round 22):
a runner holds the handle of the referee's arena for it, and can make as many allocations and
handles of its own as it likes. If the bytes of a handle follow a pattern (a counter, an id
per allocation), it could guess the handle of another of the referee's allocations, e.g. the
other runner's arena, and open it.

Process A (the referee's shape) makes three allocations with ``cuMemAlloc``, fills each with
its own marker and hands B only the first one's handle. Process B (the runner's shape) makes
allocations of its own, learns which bytes of its handles change from one to the next and by
how much, applies every such change (and nearby ones) to A's handle, and tries to open each
guess. A guess that opens memory holding A's second or third marker is a forgery.

    python benchmarks/ipc_forge_diag.py [--tries 1024]

Prints the bytes that differ between consecutive handles of one process, how many guesses
were tried, how many opened, and whether any reached another allocation of A's.
"""

from __future__ import annotations

import argparse
import ctypes
import itertools
import multiprocessing as mp
from typing import Any

import torch

from cudal1_evaluator.wire.cuda_ipc import (
    HANDLE_BYTES,
    _ArrayInterface,
    _bind_context,
    _Handle,
    address_range,
)

SIZE = 1 << 20
MARKERS = (11.0, 22.0, 33.0)


def _alloc(lib: Any, device: torch.device, value: float) -> tuple[int, bytes]:
    ptr = ctypes.c_uint64()
    assert lib.cuMemAlloc_v2(ctypes.byref(ptr), SIZE) == 0
    torch.as_tensor(_ArrayInterface(int(ptr.value), SIZE), device=device).view(
        torch.float32).fill_(value)
    made = _Handle()
    assert lib.cuIpcGetMemHandle(ctypes.byref(made), ptr) == 0
    return int(ptr.value), bytes(made)


def _exporter(conn: Any) -> None:
    device = torch.device("cuda")
    lib = _bind_context(device)
    handles = [_alloc(lib, device, v)[1] for v in MARKERS]
    torch.cuda.synchronize()
    conn.send(handles)  # the guesser guesses from the first; the others only to compare
    conn.recv()  # hold the allocations until the guesser is done


def _diffs(handles: list[bytes]) -> list[tuple[int, int]]:
    """(word index, delta) of every 4-byte word that changes between consecutive handles."""
    found = []
    for a, b in itertools.pairwise(handles):
        for w in range(HANDLE_BYTES // 4):
            x = int.from_bytes(a[4 * w:4 * w + 4], "little")
            y = int.from_bytes(b[4 * w:4 * w + 4], "little")
            if x != y:
                found.append((w, (y - x) & 0xFFFFFFFF))
    return found


def _guesses(seed: bytes, diffs: list[tuple[int, int]], tries: int) -> list[bytes]:
    words = sorted({w for w, _ in diffs})
    deltas = sorted({d for _, d in diffs} | {1, 2, 3, 0xFFFFFFFF, 0xFFFFFFFE})
    out = []
    for w in words:
        for d in deltas:
            for k in range(1, 9):
                word = (int.from_bytes(seed[4 * w:4 * w + 4], "little") + k * d) & 0xFFFFFFFF
                out.append(seed[:4 * w] + word.to_bytes(4, "little") + seed[4 * w + 4:])
    return out[:tries]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tries", type=int, default=1024)
    args = parser.parse_args()
    ctx = mp.get_context("spawn")
    mine, theirs = ctx.Pipe()
    exporter = ctx.Process(target=_exporter, args=(theirs,))
    exporter.start()
    real = mine.recv()
    seed = real[0]
    device = torch.device("cuda")
    lib = _bind_context(device)
    lib.cuMemcpyDtoH_v2.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t]
    own = [_alloc(lib, device, 0.0)[1] for _ in range(6)]
    diffs = _diffs(own)
    opened = reached = 0
    details: list[str] = []
    for n, guess in enumerate(_guesses(seed, diffs, args.tries)):
        ptr = ctypes.c_uint64()
        if lib.cuIpcOpenMemHandle_v2(ctypes.byref(ptr), _Handle.from_buffer_copy(guess), 1):
            continue
        opened += 1
        found = address_range(int(ptr.value))
        word = ctypes.c_float()
        code = lib.cuMemcpyDtoH_v2(ctypes.byref(word), ptr.value, 4)  # an error, not a fault
        same = [i for i, h in enumerate(real) if h == guess]
        reached += (code == 0 and word.value in MARKERS[1:]) or bool(same and same != [0])
        if len(details) < 8:
            details.append(f"guess {n}: equals A's handle {same or '-'}, range {found}, "
                           f"read code {code}, value {word.value}")
        lib.cuIpcCloseMemHandle(ptr.value)
        if code:
            break  # the context may be lost: nothing after this is trustworthy
    mine.send("done")
    exporter.join()
    for line in details:
        print(line)
    print("handles of A (hex, 4-byte words):")
    for h in real:
        print("  " + " ".join(h[4 * w:4 * w + 4].hex() for w in range(HANDLE_BYTES // 4)))
    print("| what | value |\n| --- | --- |")
    print(f"| words that change between one process's handles | {sorted({w for w, _ in diffs})} |")
    print(f"| guesses tried | {min(args.tries, len(_guesses(seed, diffs, args.tries)))} |")
    print(f"| guesses the driver opened | {opened} |")
    print(f"| guesses reaching another allocation of the exporter | {reached} |")
    print("forgery " + ("WORKS: handles are guessable" if reached else "not found"))


if __name__ == "__main__":
    main()
