"""Timing lanes: where evaluations run, one at a time per lane.

A lane is one device that times one evaluation at a time: a GPU (``cuda:N``) or the CPU.
``LocalLanes`` hands out the host's lanes to whichever evaluation asks first; a lane taken is
also held across processes (``device_lock.hold_device``), so a second cudal1-tui run on the
same GPU waits instead of timing beside us. ``SlotLanes`` hands out slots only, for a
scheduler that places the work itself: Ray puts each evaluation on a GPU of the cluster (a
task of ``num_gpus=1``) and never runs two on one GPU, so no lock is taken here.

Each lane counts the seconds it was busy, for the throughput report, by what held it (a
problem's reference probe or an evaluation).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Protocol

from cudal1_tui.engine.device_lock import hold_device

OnWait = Callable[[str], None]
EVALUATION = "evaluation"
PROBE = "probe"


def device_key(device: str) -> str:
    """``cuda`` is the current CUDA device, which is device 0 in a fresh process."""
    value = device.strip().lower()
    return "cuda:0" if value == "cuda" else value


_THREAD_LOCKS: dict[str, threading.Lock] = {}
_REGISTRY_LOCK = threading.Lock()


def device_lock(device: str) -> threading.Lock:
    """The process-wide lock of one device: held while a candidate is evaluated on it."""
    with _REGISTRY_LOCK:
        return _THREAD_LOCKS.setdefault(device_key(device), threading.Lock())


@dataclass
class Lane:
    device: str  # what the job's ``device`` field is set to while it holds this lane
    busy_by_kind: dict[str, float] = field(default_factory=dict)  # seconds held, by kind
    holds_by_kind: dict[str, int] = field(default_factory=dict)

    def use(self) -> LaneUse:
        return LaneUse(self.device, dict(self.busy_by_kind), dict(self.holds_by_kind))


@dataclass(frozen=True)
class LaneUse:
    """One lane's share of a run, for the throughput report."""

    device: str
    busy_by_kind: dict[str, float]
    holds_by_kind: dict[str, int]

    @property
    def busy_s(self) -> float:
        return sum(self.busy_by_kind.values())

    @property
    def evaluations(self) -> int:
        """Holds of any kind."""
        return sum(self.holds_by_kind.values())


class Lanes(Protocol):
    """Hands out lanes; ``hold`` yields the lane, or None when cancelled while waiting."""

    @property
    def width(self) -> int: ...

    def hold(self, holder: str, on_wait: OnWait | None = None,
             cancel: threading.Event | None = None, kind: str = EVALUATION
             ) -> AbstractContextManager[Lane | None]: ...

    def usage(self) -> list[LaneUse]: ...


@dataclass
class _FreeList:
    """The lanes not in use, taken first come first served (a condition variable)."""

    lanes: list[Lane]
    free: deque[Lane] = field(init=False)
    cond: threading.Condition = field(default_factory=threading.Condition)

    def __post_init__(self) -> None:
        self.free = deque(self.lanes)

    def take(self, on_wait: OnWait | None, cancel: threading.Event | None) -> Lane | None:
        with self.cond:
            told = False
            while not self.free:
                if cancel is not None and cancel.is_set():
                    return None
                if on_wait is not None and not told:
                    on_wait(f"waiting for a free timing lane ({len(self.lanes)} busy)")
                    told = True
                self.cond.wait(0.2)
            return self.free.popleft()

    def give(self, lane: Lane, busy_s: float, kind: str) -> None:
        with self.cond:
            lane.busy_by_kind[kind] = lane.busy_by_kind.get(kind, 0.0) + busy_s
            lane.holds_by_kind[kind] = lane.holds_by_kind.get(kind, 0) + 1
            self.free.append(lane)
            self.cond.notify()

    def usage(self) -> list[LaneUse]:
        with self.cond:
            return [lane.use() for lane in self.lanes]


class LocalLanes:
    """One lane per device of this host; each held in this process and across processes."""

    def __init__(self, devices: list[str]) -> None:
        if not devices:
            raise ValueError("at least one device is needed")
        self._free = _FreeList([Lane(d) for d in dict.fromkeys(devices)])

    @property
    def width(self) -> int:
        return len(self._free.lanes)

    @contextmanager
    def hold(self, holder: str, on_wait: OnWait | None = None,
             cancel: threading.Event | None = None, kind: str = EVALUATION
             ) -> Iterator[Lane | None]:
        lane = self._free.take(on_wait, cancel)
        if lane is None:
            yield None
            return
        started = time.monotonic()
        try:
            with device_lock(lane.device), hold_device(device_key(lane.device), holder,
                                                       on_wait=on_wait, cancel=cancel) as held:
                started = time.monotonic()
                yield lane if held else None
        finally:
            self._free.give(lane, time.monotonic() - started, kind)

    def usage(self) -> list[LaneUse]:
        return self._free.usage()


class SlotLanes:
    """``width`` slots for evaluations in flight (on a Ray cluster: Ray picks the GPU)."""

    def __init__(self, width: int, device: str) -> None:
        self._free = _FreeList([Lane(device) for _ in range(max(1, width))])

    @property
    def width(self) -> int:
        return len(self._free.lanes)

    @contextmanager
    def hold(self, holder: str, on_wait: OnWait | None = None,
             cancel: threading.Event | None = None, kind: str = EVALUATION
             ) -> Iterator[Lane | None]:
        del holder  # the scheduler that runs the work keeps evaluations apart
        lane = self._free.take(on_wait, cancel)
        if lane is None:
            yield None
            return
        started = time.monotonic()
        try:
            yield lane
        finally:
            self._free.give(lane, time.monotonic() - started, kind)

    def usage(self) -> list[LaneUse]:
        return self._free.usage()
