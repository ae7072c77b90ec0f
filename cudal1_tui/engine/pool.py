"""The evaluation pipeline: builds on the CPU cores, evaluations one at a time per device.

Two stages:

- **build**: ``max(1, os.cpu_count() - 1)`` threads, each running one sandboxed build
  subprocess (``cudal1_evaluator.launch.build``) that imports the candidate so ``load_inline``
  compiles into the keyed build cache. Candidates with nothing to compile skip it.
- **evaluate**: one thread per pool, taking candidates in the order they were submitted,
  each waiting for its own build and then holding the device's lock while the evaluator
  verifies and times it. The lock is per device string and shared by every pool in the
  process, and an ``flock`` per device (``device_lock``) extends it to other processes, so
  two sessions on one GPU never time at the same moment.

Evaluating in submission order keeps the trace's record order deterministic: it is the
order candidates entered the pool, whatever order their builds finish in. The price is
that a candidate ready early may wait behind an earlier one still compiling.

On a ``cpu`` device a build shares the cores with a timing run; the evaluator times the
reference and the candidate interleaved, so both see the same load, but the numbers are
noisier than on a GPU (a reference slower than a pristine run gives way to the pristine
one; a rejection on the wall clock alone is confirmed by a second evaluation).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import TypeVar

from cudal1_tui.engine.device_lock import hold_device

B = TypeVar("B")
T = TypeVar("T")

_DEVICE_LOCKS: dict[str, threading.Lock] = {}
_REGISTRY_LOCK = threading.Lock()


def device_key(device: str) -> str:
    """``cuda`` is the current CUDA device, which is device 0 in a fresh process."""
    value = device.strip().lower()
    return "cuda:0" if value == "cuda" else value


def device_lock(device: str) -> threading.Lock:
    """The process-wide lock of one device: held while a candidate is evaluated on it."""
    with _REGISTRY_LOCK:
        return _DEVICE_LOCKS.setdefault(device_key(device), threading.Lock())


def build_workers() -> int:
    return max(1, (os.cpu_count() or 1) - 1)


class EvalPool:
    def __init__(self, device: str, workers: int | None = None, *, holder: str = "") -> None:
        self.device = device
        self.holder = holder or "a cudal1-tui session"
        self.workers = workers or build_workers()
        self._builds = ThreadPoolExecutor(max_workers=self.workers,
                                          thread_name_prefix="build")
        self._evals = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"eval-{device}")

    def submit(self, build: Callable[[], B] | None,
               evaluate: Callable[[B | None], T]) -> Future[T]:
        """Run ``build`` (if any) on a build thread, then ``evaluate`` with its value, in
        submission order. A build cut short by ``shutdown`` hands ``None`` to ``evaluate``."""
        built = self._builds.submit(build) if build is not None else None

        def stage() -> T:
            value: B | None = None
            if built is not None:
                try:
                    value = built.result()
                except CancelledError:
                    value = None
            return evaluate(value)

        return self._evals.submit(stage)

    @contextmanager
    def on_device(self, on_wait: Callable[[str], None] | None = None,
                  cancel: threading.Event | None = None) -> Iterator[bool]:
        """Hold the device: only one evaluation at a time runs inside this, per device, in
        this process and across processes. Yields False when cancelled while waiting."""
        with device_lock(self.device), hold_device(device_key(self.device), self.holder,
                                                   on_wait=on_wait, cancel=cancel) as held:
            yield held

    def shutdown(self) -> None:
        self._builds.shutdown(wait=False, cancel_futures=True)
        self._evals.shutdown(wait=True, cancel_futures=True)
        self._builds.shutdown(wait=True)
