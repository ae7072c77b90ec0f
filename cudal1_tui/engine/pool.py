"""The evaluation pool: one evaluator job at a time per device.

Why serial per device: a candidate's timing must not share the device (or, on CPU,
the cores) with another candidate's compile or run, or its numbers are noise. The
overlap the loop does get is model generation running while earlier candidates are
evaluated: each slot's reply enters this queue as soon as it has been parsed.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")


class EvalPool:
    def __init__(self, device: str) -> None:
        self.device = device
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"eval-{device}")

    def submit(self, fn: Callable[[], T]) -> Future[T]:
        return self._executor.submit(fn)

    def shutdown(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)
