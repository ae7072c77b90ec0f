"""What the runner's per-call bookkeeping costs on a GPU: a window's loop holds each output and
says where it lies (``Exporter.locate``: a driver call for the allocation's range, a cached
IPC handle). Where that costs more host time than the call's kernels take, the loop is bound by
our bookkeeping, not by the candidate, and a fast kernel reads slow.

``python benchmarks/handover_cost.py`` (CUDA): for outputs of several sizes, the device time a
call (CUDA events over many calls), and the wall time a call of a loop of calls that holds
each output (plain), that also checks it (``copyable``), and that also locates it; then the
driver call alone, with the GPU idle and busy.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from cudal1_evaluator.wire.cuda_ipc import Exporter, address_range
from cudal1_evaluator.wire.tensor_exchange import copyable

CALLS = 200
REPEATS = 5


def _device_ms(fn: Callable[[], torch.Tensor]) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(CALLS):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / CALLS


def _loop_ms(fn: Callable[[], torch.Tensor], mode: str, buf: torch.Tensor) -> float:
    walls = []
    exporter = Exporter()
    for _ in range(REPEATS):
        held: list[Any] = []
        table: list[str] = []
        index: dict[bytes, int] = {}
        torch.cuda.synchronize()
        started = time.perf_counter()
        for _ in range(CALLS):
            out = fn()
            held.append(out)
            if mode != "plain" and copyable(out, buf) and mode == "locate":
                exporter.locate(out, table, index)
        torch.cuda.synchronize()
        walls.append((time.perf_counter() - started) * 1e3 / CALLS)
    return statistics.median(walls)


def _driver_us(ptrs: list[int]) -> float:
    started = time.perf_counter()
    for _ in range(20):
        for p in ptrs:
            address_range(p)
    return (time.perf_counter() - started) * 1e6 / (20 * len(ptrs))


def main() -> None:
    print(torch.cuda.get_device_name(), "torch", torch.__version__)
    print(f"{'output':>10s} {'device ms':>10s} {'plain':>8s} {'checked':>8s} {'located':>8s}")
    for numel in (1 << 10, 1 << 16, 1 << 20, 1 << 22, 1 << 24):
        x = torch.randn(numel, device="cuda")
        buf = torch.empty_like(x)

        def call(x: torch.Tensor = x) -> torch.Tensor:
            return torch.relu(x)

        _loop_ms(call, "locate", buf)  # warm: handles made once per allocation
        dev = _device_ms(call)
        row = [_loop_ms(call, mode, buf) for mode in ("plain", "checked", "locate")]
        print(f"{numel * 4 / 2**20:8.2f}MB {dev:10.4f} " + " ".join(f"{v:8.4f}" for v in row))
    outs = [torch.empty(1 << 20, device="cuda") for _ in range(64)]
    ptrs = [int(o.data_ptr()) for o in outs]
    idle = _driver_us(ptrs)
    torch.cuda._sleep(int(2e9))  # type: ignore[attr-defined]  # the GPU busy for a while
    busy = _driver_us(ptrs)
    torch.cuda.synchronize()
    print(f"cuMemGetAddressRange: {idle:.2f} us idle, {busy:.2f} us with a kernel running")


if __name__ == "__main__":
    main()
