"""What the evaluator's CUDA profiler pass costs, and whether it leaves a trace on later timings.

The profile phase took ~2.7 s of a ~4 s cached re-evaluation on an H200. This separates the
one-off CUPTI/Kineto start-up from the per-session cost, compares CPU+CUDA activities with
CUDA only, and times small kernel launches before and after a profiler session (a warm worker
that starts the profiler early must not make later timings slower).

    python benchmarks/profiler_cost.py                # first session with CPU+CUDA activities
    python benchmarks/profiler_cost.py --first cuda   # first session with CUDA only
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch.profiler import ProfilerActivity, profile

CPU, CUDA = ProfilerActivity.CPU, ProfilerActivity.CUDA


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--first", choices=["both", "cuda"], default="both")
    args = parser.parse_args()
    x = torch.randn(4096, 4096, device="cuda")
    small = torch.randn(1024, device="cuda")

    def work() -> None:
        for _ in range(3):
            torch.relu(x @ x)
        torch.cuda.synchronize()

    def launch_us(n: int = 2000) -> float:
        runs = []
        for _ in range(5):
            torch.cuda.synchronize()
            started = time.perf_counter()
            for _ in range(n):
                small.add_(1.0)
            torch.cuda.synchronize()
            runs.append((time.perf_counter() - started) / n * 1e6)
        return statistics.median(runs)

    def matmul_ms() -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        runs = []
        for _ in range(20):
            start.record()
            x @ x
            end.record()
            torch.cuda.synchronize()
            runs.append(start.elapsed_time(end))
        return statistics.median(runs)

    def session(label: str, activities: list[ProfilerActivity]) -> None:
        started = time.perf_counter()
        with profile(activities=activities) as prof:
            work()
        stopped = time.perf_counter()
        kernels = [e for e in prof.events() if getattr(e.device_type, "name", "") == "CUDA"]
        parsed = time.perf_counter()
        print(f"{label:<34} session {stopped - started:6.3f} s, events() {parsed - stopped:6.3f} s,"
              f" {len(kernels)} kernels")

    work()
    before = (launch_us(), matmul_ms())
    first = [CPU, CUDA] if args.first == "both" else [CUDA]
    session(f"1st session ({args.first})", first)
    session("2nd session (CPU+CUDA)", [CPU, CUDA])
    session("3rd session (CUDA only)", [CUDA])
    session("4th session (CUDA only)", [CUDA])
    after = (launch_us(), matmul_ms())
    print(f"small launch: {before[0]:.2f} µs before any profiler, {after[0]:.2f} µs after")
    print(f"4096² matmul: {before[1]:.3f} ms before, {after[1]:.3f} ms after")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
