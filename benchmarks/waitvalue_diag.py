"""Can a stopped process's GPU work be released by another process's write? The known limit of
``docs/security.md`` ("GPU work waiting"), tried on a GPU: process B (the candidate's shape)
queues, on a stream of its own, ``cuStreamWaitValue32`` over a word of memory process A (the
referee's shape) exported to it, then a matmul into A's memory, and stops itself (SIGSTOP).
A then times its idle probe (is the GPU idle while B's stream waits?), writes the word, and
watches the output appear while B is still stopped.

    python benchmarks/waitvalue_diag.py [--n 8192]

Prints one table: the idle probe before B queued, while B waits, the time from the write to
B's output being complete, and whether B was stopped throughout. If the output completes, the
fill-released precompute works on this driver, and the evaluator's windows need inputs that
cannot be named before the clock starts.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import time
from typing import Any

import torch
import torch.multiprocessing as mp

CU_STREAM_WAIT_VALUE_EQ = 0x1


def _wait_value(stream: torch.cuda.Stream, address: int, value: int) -> int:
    cuda = ctypes.CDLL("libcuda.so.1")
    fn = getattr(cuda, "cuStreamWaitValue32_v2", None) or cuda.cuStreamWaitValue32
    fn.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint]
    return int(fn(ctypes.c_void_p(stream.cuda_stream), ctypes.c_uint64(address),
                  ctypes.c_uint32(value), ctypes.c_uint(CU_STREAM_WAIT_VALUE_EQ)))


def _candidate(flag: torch.Tensor, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor,
               queue: Any) -> None:
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):  # cuBLAS's handle and workspace for this stream made now:
        torch.matmul(a, b)  # their first use synchronizes, which behind the wait never returns
    torch.cuda.synchronize()
    code = _wait_value(stream, flag.data_ptr(), 1)
    with torch.cuda.stream(stream):
        torch.matmul(a, b, out=out)
    queue.put(("queued", code, os.getpid()))
    os.kill(os.getpid(), signal.SIGSTOP)  # stopped, as a runner between its requests
    time.sleep(60)


def _probe_ms() -> float:
    """The referee's idle op, in spirit: a tiny kernel's round trip."""
    x = torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    times = []
    for _ in range(5):
        started = time.perf_counter()
        x.add_(1)
        torch.cuda.synchronize()
        times.append((time.perf_counter() - started) * 1e3)
    return sorted(times)[2]


def _stopped(pid: int) -> bool:
    with open(f"/proc/{pid}/stat", "rb") as f:
        return f.read().rsplit(b")", 1)[1].split()[0] == b"T"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=8192)
    args = parser.parse_args()
    mp.set_start_method("spawn")
    n = args.n
    flag = torch.zeros(1, dtype=torch.int32, device="cuda")
    a, b = (torch.randn(n, n, device="cuda") for _ in range(2))
    out = torch.full((n, n), float("nan"), device="cuda")
    expected = a @ b
    torch.cuda.synchronize()
    idle_before = _probe_ms()
    queue = mp.get_context("spawn").Queue()
    child = mp.get_context("spawn").Process(target=_candidate, args=(flag, a, b, out, queue))
    child.start()
    try:
        _tag, code, pid = queue.get(timeout=120)
    except Exception:  # queue.Empty: B died or hung before queueing its work
        child.kill()
        raise SystemExit(f"process B queued nothing in 120 s (exit code {child.exitcode})") \
            from None
    time.sleep(0.2)
    idle_waiting, stopped_before = _probe_ms(), _stopped(pid)
    started = time.perf_counter()
    flag.fill_(1)
    torch.cuda.synchronize()
    done_ms = None
    while time.perf_counter() - started < 5.0:
        if torch.allclose(out, expected, rtol=1e-3, atol=1e-3):
            done_ms = (time.perf_counter() - started) * 1e3
            break
        time.sleep(0.001)
    stopped_after = _stopped(pid)
    os.kill(pid, signal.SIGKILL)
    child.join()
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, n={n}")
    print("| cuStreamWaitValue32 | idle probe before | idle probe while B waits | "
          "B stopped (before / after) | output complete after the write |")
    print("|---|---|---|---|---|")
    print(f"| {code} | {idle_before:.3f} ms | {idle_waiting:.3f} ms | "
          f"{stopped_before} / {stopped_after} | "
          f"{f'{done_ms:.1f} ms' if done_ms is not None else 'no (5 s)'} |")


if __name__ == "__main__":
    main()
