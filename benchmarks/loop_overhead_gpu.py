"""Where a window's per-call time goes, without the evaluator (one process, CUDA events and
the host clock): a do_bench-style single call vs N calls on N distinct input sets with the
outputs held (as a timed window holds them), dropped, on one set, after an idle gap.
``python benchmarks/loop_overhead_gpu.py [N]`` on a GPU host; prints ms per call."""

from __future__ import annotations

import statistics
import sys
import time

import torch


def diag_broadcast(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a.unsqueeze(1) * b


def per_call(fn, sets, hold: bool, gap_s: float = 0.0, reps: int = 15) -> float:
    flush = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
    times = []
    for _ in range(reps):
        flush.zero_()
        torch.cuda.synchronize()
        if gap_s:
            time.sleep(gap_s)
        held = []
        t0 = time.perf_counter()
        for s in sets:
            out = fn(*s)
            if hold:
                held.append(out)
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3 / len(sets))
        del held
    return statistics.median(times)


def bench_single(fn, s) -> float:
    import triton.testing
    return float(triton.testing.do_bench(lambda: fn(*s)))


CHILD = r"""
import json, sys, torch
from pathlib import Path
from cudal1_evaluator.wire.tensor_exchange import export_tensor
n, shapes = int(sys.argv[1]), json.loads(sys.argv[2])
keep, descs = [], []
for _ in range(n):
    made = [export_tensor(torch.randn(*s, device="cuda"), Path("."), torch.device("cuda"))
            for s in shapes]
    keep.append([m[0] for m in made])
    descs.append([m[1] for m in made])
torch.cuda.synchronize()
print(json.dumps(descs), flush=True)
sys.stdin.readline()
"""


def shared_sets(n: int, shapes: list[list[int]]) -> tuple[object, list[tuple[torch.Tensor, ...]]]:
    """``n`` input sets made by another process and opened here through CUDA IPC, as a
    runner opens the referee's slots."""
    import json
    import subprocess

    from cudal1_evaluator.wire.tensor_exchange import open_shared

    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(n), json.dumps(shapes)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    descs = json.loads(proc.stdout.readline())  # type: ignore[union-attr]
    dev = torch.device("cuda")
    return proc, [tuple(open_shared(d, dev) for d in one) for one in descs]  # type: ignore[misc]


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 33
    shapes = {"diag_broadcast": (diag_broadcast, lambda: (torch.randn(4096, device="cuda"),
                                                         torch.randn(4096, 4096, device="cuda"))),
              "relu_64M": (torch.relu, lambda: (torch.randn(4096, 4096, device="cuda"),))}
    for name, (fn, make) in shapes.items():
        sets = [make() for _ in range(n)]
        one = [sets[0]] * n
        proc, ipc = shared_sets(n, [list(t.shape) for t in sets[0]])
        rows = {"do_bench": bench_single(fn, sets[0]),
                f"{n} sets, held": per_call(fn, sets, True),
                f"{n} sets, dropped": per_call(fn, sets, False),
                f"1 set x{n}, held": per_call(fn, one, True),
                f"{n} sets, held, 5 ms idle before": per_call(fn, sets, True, 0.005),
                f"{n} sets, held, 50 ms idle before": per_call(fn, sets, True, 0.05),
                f"{n} sets made by another process (IPC)": per_call(fn, ipc, True),
                "do_bench on an IPC set": bench_single(fn, ipc[0])}
        proc.stdin.write("\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]
        proc.wait()
        for key, ms in rows.items():
            print(f"{name:16s} {key:36s} {ms:8.4f} ms/call")


if __name__ == "__main__":
    main()
