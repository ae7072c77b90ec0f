"""While a trusted window is timed, the parent's helper threads that work on what a
candidate's process made (its result and progress pipes, the files it wrote) wait.

Their work grows with what the candidate leaves them (a full pipe, a tree of many files) and
runs whenever the OS schedules it: left to run, it could land in the reference's windows (the
parent's own steps there slowed, CPU taken from the reference's runner) and make the reference
read slower (round 12: a candidate could shift the disk watch's scans into them). Each such
thread calls ``between_windows()`` before each bounded unit of its work; the conductor holds
``window()`` around every window it times.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

WAIT_MOST_S = 5.0  # a helper waits at most this long (windows of other evaluations may follow)

_changed = threading.Condition()
_open = 0  # windows being timed in this process now


@contextlib.contextmanager
def window() -> Iterator[None]:
    global _open
    with _changed:
        _open += 1
    try:
        yield
    finally:
        with _changed:
            _open -= 1
            if not _open:
                _changed.notify_all()


def between_windows(wait_most_s: float = WAIT_MOST_S) -> None:
    """Return once no window is being timed (or after ``wait_most_s``); cheap when none is."""
    if not _open:
        return
    with _changed:
        _changed.wait_for(lambda: _open == 0, timeout=wait_most_s)
