"""Generations and timed evaluations kept apart, per model server, in this process.

Generations share the gate with each other (many streams at once); a timed evaluation on a
GPU the server also uses holds it alone. A timing waits until no stream is in flight; while
one waits or runs, new streams wait (so a busy server cannot starve the timing), and streams
already in flight run to their end. ``mark`` is called under the gate's lock at each change,
so a log written from it is in the order the changes happened.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

POLL_S = 0.1

Mark = Callable[[str], None]  # the event name: generation_started, timing_ended, …
OnWait = Callable[[], None]


class QuietGate:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.streams = 0  # generations in flight
        self.timing = 0  # timed evaluations running (0 or 1)
        self.waiting = 0  # timed evaluations waiting for the streams to end

    def begin_stream(self, mark: Mark, on_wait: OnWait, cancel: threading.Event) -> bool:
        """Start a generation, after any timing waiting or running; False when cancelled."""
        with self._cond:
            if not self._wait(lambda: self.timing == 0 and self.waiting == 0, on_wait, cancel):
                return False
            self.streams += 1
            mark("generation_started")
            return True

    def end_stream(self, mark: Mark) -> None:
        with self._cond:
            self.streams -= 1
            mark("generation_ended")
            self._cond.notify_all()

    def begin_timing(self, mark: Mark, on_wait: OnWait, cancel: threading.Event) -> bool:
        """Start a timed evaluation once no stream is in flight; False when cancelled."""
        with self._cond:
            self.waiting += 1
            try:
                if not self._wait(lambda: self.streams == 0 and self.timing == 0, on_wait,
                                  cancel):
                    return False
            finally:
                self.waiting -= 1
                self._cond.notify_all()
            self.timing += 1
            mark("timing_started")
            return True

    def end_timing(self, mark: Mark) -> None:
        with self._cond:
            self.timing -= 1
            mark("timing_ended")
            self._cond.notify_all()

    def _wait(self, ready: Callable[[], bool], on_wait: OnWait,
              cancel: threading.Event) -> bool:
        told = False
        while not ready():
            if cancel.is_set():  # a SlotCancel answers is_set, not wait
                return False
            if not told:
                on_wait()
                told = True
            self._cond.wait(POLL_S)
        return True


_GATES: dict[str, QuietGate] = {}
_GATES_LOCK = threading.Lock()


def gate_for(server: str) -> QuietGate:
    """The process-wide gate of one model server (its base URL): every engine of a run
    that talks to it shares it."""
    with _GATES_LOCK:
        return _GATES.setdefault(server.rstrip("/"), QuietGate())
