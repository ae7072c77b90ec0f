"""Timers captured before candidate code is imported, and the interleaved timing loop.

Every clock, event method and synchronisation function is bound to a local here
when ``Clock`` is built, so a candidate patching ``time.perf_counter``,
``torch.cuda.Event.elapsed_time`` or ``torch.cuda.synchronize`` afterwards changes
nothing. On CUDA the end timestamp is taken after a device-wide synchronisation,
so work left on side streams counts.

Each timed CUDA call starts with a head start (``HOLD_MS``): after the cache flush the
timing stream spins for a fixed time before the start event, so the host queues the call's
kernels before the GPU reaches them and its launch cost is hidden, as it is in a loop of
calls (and in ``triton.testing.do_bench``, which never waits for the GPU between calls).
The host time is not dropped: a call that returns before the GPU even reached its start
counts as ``max(GPU time, host time)``, what it costs in a loop.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import torch

from cudal1_evaluator.stats import median_rel_ci

Call = Callable[[list[Any]], Any]
_perf_counter = time.perf_counter  # bound at import, before any candidate code
# The GPU's head start per timed call: covers the host cost of launching an Inductor,
# TorchScript or Triton call (0.1-0.25 ms measured on an H100), no more, because work the
# candidate runs on a stream of its own while the timing stream spins is not seen.
HOLD_MS = 0.25


LLC_MOST = 64 * 2**20  # a cache at most this large is flushed (its double is written)


def _llc_bytes() -> int:
    """The largest CPU cache, from sysfs (32 MiB when unknown), at most ``LLC_MOST``: a cloud
    VM reports its host's whole last-level cache (300 MiB on a 2-core CI VM) while its cores
    see a slice of it, and writing 512 MiB before every window cost 37 ms off the clock,
    about 15 % of a small problem's evaluation; no core complex caches more than 96 MiB."""
    best = 0
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            text = (index / "size").read_text().strip().upper()
        except OSError:
            continue
        scale = {"K": 2**10, "M": 2**20}.get(text[-1:], 1)
        digits = text.rstrip("KM")
        if digits.isdigit():
            best = max(best, int(digits) * scale)
    return min(best or 32 * 2**20, LLC_MOST)


class _EventsCall(NamedTuple):
    fast_ms: float  # start event to the end event recorded when the call returned
    gap_ms: float  # end event to the end event recorded after a device-wide sync
    out: Any
    host_ahead_ms: float | None  # host time of a call that returned before the GPU reached it
    wait_ms: float  # host time the device-wide sync still waited once the timing stream was done


class Clock:
    """Host or CUDA-event timing with cache flushing; build it before the candidate loads.

    On CUDA each call is bracketed by a start event, an end event recorded as soon as the
    call returns (``fast``), and a second end event recorded after a device-wide sync
    (``synced``). When the device-wide sync still had to wait after the timing stream was
    done, work outlived that stream (side streams) and the sample becomes ``synced`` less
    the calibrated sync latency, plus the head start, during which such work may already
    have run, so it always counts in full.
    """

    def __init__(self, device: torch.device, hold_ms: float = HOLD_MS) -> None:
        self.device = device
        self.is_cuda = device.type == "cuda"
        self._perf = time.perf_counter_ns
        self._zero = torch.Tensor.zero_
        self.last_late = False
        self.late_count = 0
        self.hold_ms = hold_ms if self.is_cuda else 0.0
        self._hold_cycles = 0
        if self.is_cuda:
            base = torch._C._CudaEventBase
            self._record = base.record
            self._elapsed = base.elapsed_time
            self._event_sync = base.synchronize
            self._query = base.query
            self._device_sync = torch._C._cuda_synchronize
            self._spin = torch._C._cuda_sleep
            self._stream = torch.cuda.current_stream(device)
            self._events = [torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
                            for _ in range(3)]
            props = torch.cuda.get_device_properties(device)
            l2 = int(getattr(props, "L2_cache_size", 0) or 50 * 2**20)
            flush_bytes = max(2 * l2, 32 * 2**20)
        else:
            flush_bytes = 2 * _llc_bytes()
        self._flush_buf = torch.empty(flush_bytes // 4, dtype=torch.int32, device=device)
        self.name = "cuda_events" if self.is_cuda else "perf_counter"
        self._tiny = torch.empty(1024, device=device)
        self.calibrate()

    def calibrate(self) -> None:
        """Measure the host latency between the end event and the synced end event, what a
        device-wide sync costs when nothing is left to wait for, and the spin cycles that
        make the head start.

        Call it again right before timing, under the same conditions (audit hooks,
        threads) as the timed calls, so a slower host path is not taken for late work.
        """
        if not self.is_cuda:
            return
        runs = [self._events_call(lambda: self._zero(self._tiny)) for _ in range(40)]
        gaps = sorted(r.gap_ms for r in runs)
        waits = sorted(r.wait_ms for r in runs)
        self.gap_median_ms = gaps[len(gaps) // 2]
        self.wait_limit_ms = 1.5 * waits[int(len(waits) * 0.9)] + 0.02
        self._hold_cycles = self._cycles_for(self.hold_ms) if self.hold_ms > 0 else 0

    def _cycles_for(self, ms: float) -> int:
        """Spin cycles that take ``ms`` at the GPU's current clock (median of 5 tries, after
        one that lets the clock rise)."""
        probe = 200_000
        took = [self._events_call(lambda: self._spin(probe)).fast_ms for _ in range(6)]
        per_ms = probe / max(sorted(took[1:])[2], 1e-3)
        return max(1, int(per_ms * ms))

    def now(self) -> float:
        return self._perf() / 1e9

    def sync(self) -> None:
        if self.is_cuda:
            self._device_sync()

    def flush(self) -> None:
        """Write a buffer twice the last-level cache, so every timed call starts cold."""
        self._zero(self._flush_buf)
        self.sync()

    def _events_call(self, fn: Callable[[], Any], flush: bool = False, hold: int = 0
                     ) -> _EventsCall:
        """One call between events (see ``_EventsCall``).

        The flush and the head start (``hold`` spin cycles) are queued without waiting:
        while the GPU runs them, the host queues the start event and the call. Whether work
        outlived the timing stream is read from that last wait, a host interval of a few
        microseconds when nothing is left: a busy host (a compiler on every core) stretches
        the gap between the GPU timestamps, and would pass for late work.
        """
        start, end, end_synced = self._events
        self._device_sync()
        if flush:
            self._zero(self._flush_buf)
        if hold:
            self._spin(hold)
        self._record(start, self._stream)
        began = self._perf()
        out = fn()
        host_ms = (self._perf() - began) / 1e6
        ahead = not self._query(start)
        self._record(end, self._stream)
        self._event_sync(end)
        waited = self._perf()
        self._device_sync()
        wait_ms = (self._perf() - waited) / 1e6
        self._record(end_synced, self._stream)
        self._event_sync(end_synced)
        fast = float(self._elapsed(start, end))
        return _EventsCall(fast, float(self._elapsed(start, end_synced)) - fast, out,
                           host_ms if ahead else None, wait_ms)

    def time_call(self, fn: Callable[[], Any], *, flush: bool = False) -> tuple[float, Any]:
        """(milliseconds, output) of one call, from a cold cache with ``flush``; on CUDA,
        device-wide work counts, and so does host time the head start hid."""
        if self.is_cuda:
            call = self._events_call(fn, flush, self._hold_cycles)
            self.last_late = call.wait_ms > self.wait_limit_ms
            ms = call.fast_ms
            if self.last_late:
                ms += call.gap_ms - self.gap_median_ms + self.hold_ms
            if call.host_ahead_ms is not None:
                ms = max(ms, call.host_ahead_ms)
            return ms, call.out
        if flush:
            self._zero(self._flush_buf)
        t0 = self._perf()
        out = fn()
        return (self._perf() - t0) / 1e6, out


@dataclass
class Plan:
    warmup: int
    min_samples: int
    max_samples: int
    budget_s: float
    rel_ci: float


RoundHook = Callable[[dict[str, object], list[Any]], None]  # (outputs by side, inputs)
Progress = Callable[[int, int], None]


POOL_BYTES_CPU = 1 << 30
POOL_BYTES_CUDA = 4 << 30


def _nbytes(inputs: list[Any]) -> int:
    return sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor))


class InputPool:
    """Fresh input sets generated ahead, so timed rounds run back to back.

    Generating inputs on the host between rounds would leave the GPU idle (and its
    clocks falling) for the next timed call. Each set is used once; an exhausted pool
    is refilled with new sets (new values, often at the same addresses), no more than the
    rounds still expected (``next(want)``) and no more than the memory allows.
    """

    def __init__(self, make_inputs: Callable[[], list[Any]], device: torch.device,
                 most: int) -> None:
        self._make = make_inputs
        started = _perf_counter()
        first = make_inputs()
        self.make_s = _perf_counter() - started  # the cost of one fresh set
        budget = POOL_BYTES_CPU
        if device.type == "cuda":
            free, _ = torch.cuda.mem_get_info(device)
            budget = min(POOL_BYTES_CUDA, int(free * 0.25))
        self.size = max(1, min(most, budget // max(1, _nbytes(first))))
        self._sets = [first]
        self.made = 1

    def next(self, want: int | None = None) -> list[Any]:
        if not self._sets:
            count = self.size if want is None else max(1, min(self.size, want))
            self._sets = [self._make() for _ in range(count)]
            self.made += count
        return self._sets.pop()


def rounds_left(plan: Plan, n: int, elapsed: float, per_round: float) -> int:
    """Timed rounds still expected: the minimum, or what the budget leaves at this pace."""
    need = max(plan.min_samples - n, 1)
    if per_round > 0:
        need = max(need, int((plan.budget_s - elapsed) / per_round) + 1)
    return max(1, min(need, plan.max_samples - n))


def _stable(samples: dict[str, list[float]], plan: Plan) -> bool:
    return all(median_rel_ci(s) <= plan.rel_ci for s in samples.values())


def interleaved(
    clock: Clock,
    sides: dict[str, Call],
    make_inputs: Callable[[], list[Any]],
    plan: Plan,
    *,
    on_round: RoundHook | None = None,
    progress: Progress | None = None,
    prepare: dict[str, Callable[[], None]] | None = None,
    late: dict[str, int] | None = None,
) -> dict[str, list[float]]:
    """Time every side once per round, in random order, on a fresh input set per round.

    Each call gets its own copy of the round's inputs and a cold cache; ``prepare[name]``
    (e.g. applying that side's global settings) runs before the flush, untimed; ``late``
    counts each side's calls whose work outlived the timing stream. Stops at
    ``max_samples``, when every median's relative CI is within ``rel_ci`` (after
    ``min_samples``), or when the budget is spent (hard stop at 3x the budget).
    """
    rng = random.Random(os.urandom(16))
    pool = InputPool(make_inputs, clock.device, plan.max_samples + plan.warmup)
    clock.calibrate()
    warm_start = clock.now()
    warm_inputs = pool.next(1)  # untimed: one set serves every warm-up round, then is dropped
    for _ in range(plan.warmup):
        inputs = warm_inputs
        for name, call in sides.items():
            if prepare and name in prepare:
                prepare[name]()
            call([x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
        clock.sync()
    del warm_inputs
    # a timed round costs at least a warm-up round plus one fresh input set
    floor = (clock.now() - warm_start) / plan.warmup + pool.make_s if plan.warmup else 0.0
    per_round = floor
    samples: dict[str, list[float]] = {name: [] for name in sides}
    start = clock.now()
    n = 0
    while n < plan.max_samples:
        inputs = pool.next(rounds_left(plan, n, clock.now() - start, per_round))
        order = list(sides)
        rng.shuffle(order)
        outputs: dict[str, object] = {}
        for name in order:
            own = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
            if prepare and name in prepare:
                prepare[name]()
            ms, outputs[name] = clock.time_call(lambda c=sides[name], a=own: c(a),  # type: ignore[misc]
                                                flush=True)
            samples[name].append(ms)
            if late is not None and clock.last_late:
                late[name] = late.get(name, 0) + 1
        n += 1
        if on_round is not None:
            on_round(outputs, inputs)
        del outputs
        if progress is not None:
            progress(n, plan.max_samples)
        elapsed = clock.now() - start
        per_round = max(floor, elapsed / n)
        if n >= plan.min_samples and (_stable(samples, plan) or elapsed > plan.budget_s):
            break
        if elapsed > 3 * plan.budget_s:
            break
    return samples

