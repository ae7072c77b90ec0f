"""The evaluation pipeline: builds on the CPU cores, evaluations one at a time per device.

Two stages:

- **build**: ``max(1, os.cpu_count() - 1)`` threads, each running one sandboxed build
  subprocess (``cudal1_evaluator.launch.build``) that imports the candidate so ``load_inline``
  compiles into the keyed build cache. Candidates with nothing to compile skip it.
- **evaluate**: one thread per timing lane (``engine.lanes``; one lane by default: the
  session's device), taking candidates in the order they were submitted, each waiting for
  its own build and then holding a lane while the evaluator verifies and times it. A lane's
  lock is per device string and shared by every pool in the process, and an ``flock`` per
  device (``device_lock``) extends it to other processes, so two sessions on one GPU never
  time at the same moment.

With one lane, evaluating in submission order keeps the trace's record order
deterministic: it is the order candidates entered the pool, whatever order their builds
finish in. The price is that a candidate ready early may wait behind an earlier one still
compiling. With several lanes (``cudal1-tui run --headless`` on several GPUs, or a Ray
cluster) candidates start in submission order and are recorded as their verdicts come.

Several pools may share one ``BuildQueue`` (many problems in one run): the CPU cores are
then shared by all of them, and a pool shutting down cancels only its own builds.

On a ``cpu`` device a build shares the cores with a timing run; the evaluator times the
reference and the candidate interleaved, so both see the same load, but the numbers are
noisier than on a GPU (a reference slower than a pristine run gives way to the pristine
one; a rejection on the wall clock alone is confirmed by a second evaluation).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import TypeVar

from cudal1_tui.engine.lanes import Lanes, LocalLanes, OnWait, device_key, device_lock

B = TypeVar("B")
T = TypeVar("T")

__all__ = ["BuildQueue", "EvalPool", "build_workers", "device_key", "device_lock"]


def build_workers() -> int:
    return max(1, (os.cpu_count() or 1) - 1)


class BuildQueue:
    """The build threads (one sandboxed build subprocess each), with their busy time."""

    def __init__(self, workers: int | None = None) -> None:
        self.workers = workers or build_workers()
        self._executor = ThreadPoolExecutor(max_workers=self.workers,
                                            thread_name_prefix="build")
        self._lock = threading.Lock()
        self.busy_s = 0.0
        self.builds = 0

    def submit(self, build: Callable[[], B]) -> Future[B]:
        def timed() -> B:
            started = time.monotonic()
            try:
                return build()
            finally:
                with self._lock:
                    self.busy_s += time.monotonic() - started
                    self.builds += 1

        return self._executor.submit(timed)

    def shutdown(self, *, wait: bool) -> None:
        self._executor.shutdown(wait=wait, cancel_futures=True)


class EvalPool:
    def __init__(self, device: str, workers: int | None = None, *, holder: str = "",
                 lanes: Lanes | None = None, builds: BuildQueue | None = None) -> None:
        self.device = device
        self.holder = holder or "a cudal1-tui session"
        self.lanes: Lanes = lanes or LocalLanes([device])
        self._own_builds = builds is None
        self._builds = builds or BuildQueue(workers)
        self.workers = self._builds.workers
        self._pending: set[Future[object]] = set()
        self._pending_lock = threading.Lock()
        self._evals = ThreadPoolExecutor(max_workers=self.lanes.width,
                                         thread_name_prefix=f"eval-{device}")

    def submit(self, build: Callable[[], B] | None,
               evaluate: Callable[[B | None], T]) -> Future[T]:
        """Run ``build`` (if any) on a build thread, then ``evaluate`` with its value, in
        submission order. A build cut short by ``shutdown`` hands ``None`` to ``evaluate``."""
        built = self._track(self._builds.submit(build)) if build is not None else None

        def stage() -> T:
            value: B | None = None
            if built is not None:
                try:
                    value = built.result()
                except CancelledError:
                    value = None
            return evaluate(value)

        return self._evals.submit(stage)

    def _track(self, future: Future[B]) -> Future[B]:
        with self._pending_lock:
            self._pending.add(future)  # type: ignore[arg-type]
        future.add_done_callback(self._untrack)
        return future

    def _untrack(self, future: Future[B]) -> None:
        with self._pending_lock:
            self._pending.discard(future)  # type: ignore[arg-type]

    @contextmanager
    def on_lane(self, on_wait: OnWait | None = None,
                cancel: threading.Event | None = None) -> Iterator[str | None]:
        """Hold a timing lane: only one evaluation at a time runs on it, in this process
        and across processes. Yields the lane's device (what the job runs on), or None when
        cancelled while waiting."""
        with self.lanes.hold(self.holder, on_wait, cancel) as lane:
            yield lane.device if lane is not None else None

    @contextmanager
    def on_device(self, on_wait: OnWait | None = None,
                  cancel: threading.Event | None = None) -> Iterator[bool]:
        """``on_lane`` for callers that need not know the device: yields whether it is held."""
        with self.on_lane(on_wait, cancel) as device:
            yield device is not None

    def shutdown(self) -> None:
        with self._pending_lock:
            pending = list(self._pending)
        for future in pending:
            future.cancel()
        if self._own_builds:
            self._builds.shutdown(wait=False)
        self._evals.shutdown(wait=True, cancel_futures=True)
        if self._own_builds:
            self._builds.shutdown(wait=True)
