"""Heavy pure work (parsing a reply, the static gate) that a cancel does not wait for.

Python cannot interrupt a thread, so the work runs on a daemon thread of its own and the
caller waits for it or for the cancel, whichever comes first: Ctrl-C ends a run within a
fraction of a second even mid-parse. Abandoned work finishes (or dies with the process)
unobserved; it writes nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
POLL_S = 0.05


class Abandoned(Exception):
    """The cancel came first; the work's result will never be read."""


def unless_cancelled(work: Callable[[], T], cancel: threading.Event, name: str = "work") -> T:
    """``work()``, or ``Abandoned`` as soon as ``cancel`` is set; its exceptions propagate."""
    done = threading.Event()
    box: dict[str, T] = {}
    failure: list[BaseException] = []

    def target() -> None:
        try:
            box["value"] = work()
        except BaseException as exc:  # handed to the waiting thread
            failure.append(exc)
        finally:
            done.set()

    threading.Thread(target=target, name=f"abandonable-{name}", daemon=True).start()
    while not done.wait(POLL_S):
        if cancel.is_set():
            raise Abandoned(name)
    if failure:
        raise failure[0]
    return box["value"]
