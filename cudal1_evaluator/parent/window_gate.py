"""While an evaluation times a window, the parent's helper threads that work on what its
children made (their result and progress pipes, the files they wrote) wait.

Their work grows with what a candidate leaves them (a full pipe, a tree of many files) and
runs whenever the OS schedules it: left to run, it could land in the reference's windows (the
parent's own steps there slowed, CPU taken from the reference's runner) and make the reference
read slower (round 12: a candidate could shift the disk watch's scans into them). Each such
thread calls ``between_windows()`` before each bounded unit of its work; the conductor holds
``window()`` around every window it times. One gate an evaluation: several evaluations in one
process (one a GPU) do not hold each other's helpers.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

WAIT_MOST_S = 5.0  # a helper waits at most this long, then does one unit of work


class Gate:
    """``on_open`` and ``on_close`` run as the first window opens and the last one closes
    (the host's warm children held stopped meanwhile, ``warm.hold_idle``)."""

    def __init__(self, on_open: Callable[[], None] | None = None,
                 on_close: Callable[[], None] | None = None) -> None:
        self._changed = threading.Condition()
        self._open = 0  # windows being timed now
        self._on_open, self._on_close = on_open, on_close

    @contextlib.contextmanager
    def window(self) -> Iterator[None]:
        with self._changed:
            self._open += 1
            if self._open == 1 and self._on_open is not None:
                self._on_open()
        try:
            yield
        finally:
            with self._changed:
                self._open -= 1
                if not self._open:
                    if self._on_close is not None:
                        self._on_close()
                    self._changed.notify_all()

    def between_windows(self, wait_most_s: float = WAIT_MOST_S) -> None:
        """Return once no window is being timed (or after ``wait_most_s``); cheap when none
        is."""
        if not self._open:
            return
        with self._changed:
            self._changed.wait_for(lambda: self._open == 0, timeout=wait_most_s)


OPEN = Gate()  # the gate of a child no evaluation times: never closed
