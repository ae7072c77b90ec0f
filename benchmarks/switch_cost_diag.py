"""What a call released by another process costs on a GPU, and where it goes (security.md,
Known limits, "Per-call release costs each call a round trip"): the context switches a
trusted step between two calls forces, by how the step is done, and whether a GPU-side
doorbell (stream waits and writes on a shared word, no host round trip a call) removes them.

Two processes, A (a runner: one elementwise kernel a call) and B (a referee: a step between
A's calls), each with its own CUDA context on one GPU, share one page of host memory.

- ``host``: A spins on the page for its release, launches, synchronizes and rings; B spins
  for the ring, runs its step (synchronized) and releases the next call. The per-call cycle
  is what the evaluator's protocol pays less its sockets.
- ``gpu``: nothing waits on a host a call. A's stream waits for the release word, runs the
  kernel and writes its done word; B's stream waits for that, runs the step and writes the
  next release (``cuStreamWaitValue32``/``cuStreamWriteValue32`` on the page, registered
  with the driver). Everything is queued first; B's host times the whole run.

Steps: ``none`` (B does nothing on the GPU), ``tiny`` (a one-element kernel), ``kcopy`` (a
copy of MB by an elementwise kernel, as ``referee.copy_by_kernel``), ``dma`` (``copy_`` of
MB, the copy engines), and ``alone`` (no B: A's calls back to back, host-synchronized each
in ``host`` mode, queued in ``gpu`` mode).

    python benchmarks/switch_cost_diag.py [--calls 300] [--sizes 4K,64M] [--copy-mb 128]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import mmap
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # the referee's copy, run as a script

WORD = struct.Struct("<I")
RELEASE, DONE, READY_A, READY_B = 0, 64, 128, 192  # word offsets, a cache line apart


def _size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def _get(page: mmap.mmap, at: int) -> int:
    return int(WORD.unpack_from(page, at)[0])


def _put(page: mmap.mmap, at: int, value: int) -> None:
    WORD.pack_into(page, at, value)


def _spin(page: mmap.mmap, at: int, least: int, limit_s: float = 60.0) -> None:
    deadline = time.monotonic() + limit_s
    while _get(page, at) < least:
        if time.monotonic() > deadline:
            raise TimeoutError(f"word {at} stayed below {least}")


class Driver:
    """The few driver calls a GPU doorbell needs, on torch's current context."""

    def __init__(self) -> None:
        self.cu = ctypes.CDLL("libcuda.so.1")

    def _call(self, name: str, *args: object) -> None:
        fn = getattr(self.cu, name + "_v2", None) or getattr(self.cu, name)
        rc = fn(*args)
        if rc != 0:
            raise RuntimeError(f"{name} returned {rc}")

    def device_pointer(self, page: mmap.mmap) -> int:
        base = ctypes.addressof(ctypes.c_char.from_buffer(page))
        self._call("cuMemHostRegister", ctypes.c_void_p(base), ctypes.c_size_t(len(page)),
                   ctypes.c_uint(1 | 2))  # PORTABLE | DEVICEMAP
        dptr = ctypes.c_uint64()
        self._call("cuMemHostGetDevicePointer", ctypes.byref(dptr), ctypes.c_void_p(base),
                   ctypes.c_uint(0))
        return dptr.value

    def wait(self, stream: int, addr: int, value: int) -> None:
        self._call("cuStreamWaitValue32", ctypes.c_void_p(stream), ctypes.c_uint64(addr),
                   ctypes.c_uint32(value), ctypes.c_uint(0))  # GEQ

    def write(self, stream: int, addr: int, value: int) -> None:
        self._call("cuStreamWriteValue32", ctypes.c_void_p(stream), ctypes.c_uint64(addr),
                   ctypes.c_uint32(value), ctypes.c_uint(0))


def _host_loop(page: mmap.mmap, calls: int, wait_at: int | None, wait_from: int,
               work: Callable[[], None], ring_at: int, ring_from: int,
               ) -> tuple[list[float], float]:
    """``calls`` turns of: spin until word ``wait_at`` reaches ``j + wait_from`` (None: no
    wait), run ``work`` (timed), set word ``ring_at`` to ``j + ring_from``. Returns each
    work's time and the whole loop's time a turn (µs)."""
    times: list[float] = []
    started = time.perf_counter_ns()
    for j in range(calls):
        if wait_at is not None:
            _spin(page, wait_at, j + wait_from)
        t0 = time.perf_counter_ns()
        work()
        times.append((time.perf_counter_ns() - t0) / 1e3)
        _put(page, ring_at, j + ring_from)
    return times, (time.perf_counter_ns() - started) / 1e3 / calls


def runner(page: mmap.mmap, mode: str, step: str, calls: int, size: int) -> dict[str, float]:
    import torch
    x = torch.randn(max(1, size // 4), device="cuda")
    y = torch.empty_like(x)
    for _ in range(20):
        torch.mul(x, 2.0, out=y)
    torch.cuda.synchronize()
    if mode == "host":
        def call() -> None:
            torch.mul(x, 2.0, out=y)
            torch.cuda.synchronize()

        _put(page, READY_A, 1)
        per_call, cycle = _host_loop(page, calls, None if step == "alone" else RELEASE, 1,
                                     call, DONE, 1)
        return {"per_call_us": statistics.median(per_call), "cycle_us": cycle}
    driver = Driver()
    words = driver.device_pointer(page)
    stream = torch.cuda.current_stream().cuda_stream
    queued = time.perf_counter_ns()
    _put(page, READY_A, 1)  # before queueing: a full queue would wait on B's first release
    for j in range(calls):
        if step != "alone":
            driver.wait(stream, words + RELEASE, j + 1)
        torch.mul(x, 2.0, out=y)
        driver.write(stream, words + DONE, j + 1)
    torch.cuda.synchronize()
    return {"queue_to_end_us": (time.perf_counter_ns() - queued) / 1e3 / calls}


def referee(page: mmap.mmap, mode: str, step: str, calls: int, copy_mb: int,
            ) -> dict[str, float]:
    import torch

    from cudal1_evaluator.trusted.referee import copy_by_kernel
    n = copy_mb * (1 << 20) // 8
    src = torch.randint(0, 1 << 40, (max(1, n),), device="cuda", dtype=torch.int64)
    dst = torch.empty_like(src)
    tiny = torch.zeros(1, device="cuda")

    def do_step() -> None:
        if step == "tiny":
            tiny.add_(1)
        elif step == "kcopy":
            copy_by_kernel(dst, src)
        elif step == "dma":
            dst.copy_(src)

    for _ in range(5):
        do_step()
    torch.cuda.synchronize()
    if mode == "host":
        def synced_step() -> None:
            if step != "none":
                do_step()
                torch.cuda.synchronize()

        _put(page, READY_B, 1)
        _spin(page, READY_A, 1)
        _put(page, RELEASE, 1)  # opens call 0
        steps, cycle = _host_loop(page, calls, DONE, 1, synced_step, RELEASE, 2)
        return {"step_us": statistics.median(steps), "cycle_us": cycle}
    driver = Driver()
    words = driver.device_pointer(page)
    stream = torch.cuda.current_stream().cuda_stream
    for j in range(calls):
        driver.wait(stream, words + DONE, j + 1)
        do_step()
        driver.write(stream, words + RELEASE, j + 2)
    _put(page, READY_B, 1)
    _spin(page, READY_A, 1)
    started = time.perf_counter_ns()
    _put(page, RELEASE, 1)  # the host's write opens call 0
    torch.cuda.synchronize()
    return {"cycle_us": (time.perf_counter_ns() - started) / 1e3 / calls}


def _child(args: argparse.Namespace) -> None:
    fd = os.open(args.page, os.O_RDWR)
    page = mmap.mmap(fd, 4096)
    if args.role == "A":
        out = runner(page, args.mode, args.step, args.calls, args.size)
    else:
        out = referee(page, args.mode, args.step, args.calls, args.copy_mb)
    print(json.dumps(out), flush=True)


def _pair(mode: str, step: str, calls: int, size: int, copy_mb: int) -> dict[str, float]:
    with tempfile.NamedTemporaryFile(dir="/dev/shm", prefix="swdiag") as f:
        f.write(b"\0" * 4096)
        f.flush()
        common = [sys.executable, __file__, "--child", "--page", f.name, "--mode", mode,
                  "--step", step, "--calls", str(calls)]
        a = subprocess.Popen([*common, "--role", "A", "--size", str(size)],
                             stdout=subprocess.PIPE, text=True)
        b = None
        if step != "alone":
            b = subprocess.Popen([*common, "--role", "B", "--copy-mb", str(copy_mb)],
                                 stdout=subprocess.PIPE, text=True)
        out_a, _ = a.communicate(timeout=300)
        result = {f"A_{k}": v for k, v in json.loads(out_a.strip().splitlines()[-1]).items()}
        if b is not None:
            out_b, _ = b.communicate(timeout=300)
            result |= {f"B_{k}": v for k, v in json.loads(out_b.strip().splitlines()[-1]).items()}
        return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--page", default="")
    parser.add_argument("--role", default="A")
    parser.add_argument("--mode", default="host")
    parser.add_argument("--step", default="none")
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--size", type=int, default=0)
    parser.add_argument("--copy-mb", type=int, default=128)
    parser.add_argument("--sizes", default="4K,64M")
    parser.add_argument("--modes", default="host,gpu")
    parser.add_argument("--steps", default="alone,none,tiny,kcopy,dma")
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    if args.child:
        _child(args)
        return
    rows = []
    for size_text in args.sizes.split(","):
        for mode in args.modes.split(","):
            for step in args.steps.split(","):
                if mode == "gpu" and step == "none":
                    continue  # B's stream would still run: same as tiny without a kernel
                try:
                    got = _pair(mode, step, args.calls, _size(size_text), args.copy_mb)
                except Exception as exc:  # a diagnostic: one failed pair, the rest go on
                    got = {"error": str(exc)[:200]}
                row = {"size": size_text, "mode": mode, "step": step, **got}
                rows.append(row)
                print(json.dumps(row), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    print(f"\n{'size':>5} {'mode':>4} {'step':>6} {'cycle us':>9} {'A call us':>9} "
          f"{'B step us':>9}")
    for r in rows:
        cycle = r.get("B_cycle_us") or r.get("A_cycle_us") or r.get("A_queue_to_end_us")
        print(f"{r['size']:>5} {r['mode']:>4} {r['step']:>6} "
              f"{cycle if cycle is None else round(cycle, 1)!s:>9} "
              f"{round(r['A_per_call_us'], 1) if 'A_per_call_us' in r else '-':>9} "
              f"{round(r['B_step_us'], 1) if 'B_step_us' in r else '-':>9}"
              f"{'  ' + r['error'] if 'error' in r else ''}")


if __name__ == "__main__":
    main()
