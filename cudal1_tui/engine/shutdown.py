"""Ending on SIGTERM and SIGHUP the way Ctrl-C ends: through the normal exit path.

Evaluator children die with the app in any case (``isolation.lifetime``); these handlers let
the app close its session, cancel the running stage and say so before it exits. On SIGHUP
the terminal is gone: the TUI closes its session and leaves without drawing (drawing to a
terminal that no longer reads can block its exit for good), and its temp dirs go with it.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType

SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class Terminated(BaseException):
    """Raised in the main thread when the process is asked to end (like KeyboardInterrupt)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def _raise(signum: int, frame: FrameType | None) -> None:
    raise Terminated(signum)


@contextlib.contextmanager
def raising_on_termination() -> Iterator[None]:
    """Within: SIGTERM/SIGHUP raise ``Terminated`` in the main thread (headless runs)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, _raise) for sig in SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def on_termination(callback: Callable[[int], None]) -> None:
    """SIGTERM/SIGHUP call ``callback(signum)`` on a fresh thread (the TUI: it asks the app to
    close and exit, which a signal handler in the event loop's thread must not do itself).
    A second signal while the first is being handled ends the process at once."""
    fired = threading.Event()

    def handler(signum: int, frame: FrameType | None) -> None:
        if fired.is_set():
            raise SystemExit(128 + signum)
        fired.set()
        threading.Thread(target=callback, args=(signum,), name="terminate", daemon=True).start()

    if threading.current_thread() is threading.main_thread():
        for sig in SIGNALS:
            signal.signal(sig, handler)


def exit_now(code: int) -> None:
    """End an interrupted run at once, its session already closed and its summary printed.

    The interpreter's own teardown (a full garbage collection and module cleanup of the model
    client, tree-sitter and Rich, plus a model-stream thread still draining) took over a
    second on a busy host, while nothing is left to save; the evaluator's lane processes are
    told to go first (they would see their channel close anyway, and their warm children die
    with them)."""
    import os
    import sys

    from cudal1_tui.engine import lane_process

    lane_process.close_all(wait_s=0)
    remove_own_temp_dirs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def remove_own_temp_dirs() -> int:
    """Remove the evaluator temp dirs this process made (its owner token is in their names);
    called once its children are gone, so nothing of a run outlives it. Returns how many."""
    import shutil
    import tempfile
    from pathlib import Path

    from cudal1_evaluator.isolation import lifetime

    pid, _, start = lifetime.owner_token().partition(" ")
    prefix = f"{lifetime.TEMP_PREFIX}{pid}_{start or 'x'}_"
    roots = {Path(tempfile.gettempdir())}
    shared = lifetime.exchange_base()
    if shared is not None:
        roots.add(shared)
    removed = 0
    for root in roots:
        for path in root.glob(prefix + "*"):
            shutil.rmtree(path, ignore_errors=True)
            removed += not path.exists()
    return removed


def close_within(close: Callable[[], None], timeout_s: float) -> None:
    """``close()`` on a thread of its own, waited for at most ``timeout_s``: an exit path
    must end even when closing hangs (the children die with this process in any case)."""
    thread = threading.Thread(target=close, name="close", daemon=True)
    thread.start()
    thread.join(timeout_s)
