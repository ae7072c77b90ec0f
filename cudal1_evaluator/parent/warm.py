"""Warm children kept ready for the next evaluation (stdlib only; the parent's side).

At most one idle child per kind (mode, device, fixed limits, scrubbed environment; the memory
and CPU-time limits travel with the job); a child is used once. ``enabled = False`` turns it
off (one-shot command lines). Warm children never saw a job: they are as pristine as cold ones,
only earlier.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import hashlib
import logging
import os
import signal
import threading
import time
from pathlib import Path

from cudal1_evaluator.isolation.child_env import scrub_env
from cudal1_evaluator.isolation.sandbox import Child, Limits, signal_name
from cudal1_evaluator.isolation.sandbox_layers import writable_for

log = logging.getLogger(__name__)

enabled = True
READY_WAIT_S = 60.0  # a warm child still importing is waited for this long at most
READY_POLL_S = 0.02
_MAX_IDLE = 5  # two runners, a referee and a profile child per device, and one spare
TALKING = ("run", "referee")  # children driven by the parent's protocol (a talk socket)
_lock = threading.Lock()
_idle: dict[str, Child] = {}
_held = 0  # host windows being timed now in this process: idle children stay stopped
# Warm children are forked by this one thread, which lives as long as the process: a child's
# parent-death signal (``lifetime.bind_to_parent``) fires when the *thread* that forked it
# ends, so one started from an evaluation's own thread was killed when that thread ended,
# before the next evaluation could take it.
_spawner = concurrent.futures.ThreadPoolExecutor(max_workers=1,
                                                 thread_name_prefix="warm-spawner")


def _kind(mode: str, device: str, limits: Limits, build_root: str, tag: str = "") -> str:
    placeholder = Path("/nonexistent")
    env = scrub_env(dict(os.environ), home=placeholder, tmpdir=placeholder)
    # memory and CPU-time limits are sent with the job: only what is fixed at start counts
    fixed = (limits.address_space, limits.nofile, limits.fsize_mb)
    text = repr((mode, tag, device, fixed, build_root, sorted(env.items())))
    return hashlib.sha256(text.encode()).hexdigest()


def take(mode: str, device: str, limits: Limits, job_text: str,
         build_root: str | None = None, tag: str = "", *, wait: bool = True) -> Child | None:
    """A live warm child of this kind whose sandbox covers the job's build dir, removed from
    the pool, or None (then the caller starts a cold one). The one place a warm child's
    coverage is checked: a child that cannot write where the job builds is never handed out.
    ``wait``: only once it is ready (else the caller calls ``await_ready`` before using it)."""
    with _lock:
        child = _idle.pop(_kind(mode, device, limits, build_root or "", tag), None)
        if child is not None and _held:  # out of the pool: no window stops it again
            _signal_group(child, signal.SIGCONT)
    if child is None:
        return None
    usable = child.covers(job_text) and (await_ready(child, mode) if wait else child.alive())
    if not usable:
        child.discard()
        return None
    return child


def await_ready(child: Child, mode: str) -> bool:
    """Wait for a warm child still importing (it started earlier than a cold one would: taking
    it is never slower); False when it died first or took too long. A child is handed out only
    once its warm-up is done: one that failed its warm-up after being handed out would end
    that evaluation."""
    deadline = time.monotonic() + READY_WAIT_S
    while child.alive() and not child.ready() and time.monotonic() < deadline:
        time.sleep(READY_POLL_S)
    if child.alive() and child.ready():
        return True
    why = ("did not get ready" if child.alive() else
           "died while waiting to be used" if child.ready() else "died before it was ready")
    code = child.proc.returncode
    how = "" if code is None else f" ({signal_name(code) or f'exit status {code}'})"
    log.warning("a warm %s child %s%s: starting a cold one; its stderr: %s", mode, why, how,
                child.stderr_tail().strip()[-1500:] or "(empty)")
    return False


def prepare(mode: str, device: str, limits: Limits, build_root: str | None = None,
            tag: str = "", *, watch_warm_up: bool = True) -> None:
    """Start a warm child of this kind unless one is waiting already; its sandbox may write
    ``build_root``, where the next job of this kind builds. ``watch_warm_up``: False for a
    runner that never runs a correctness trial (the reference's)."""
    if not enabled:
        return
    kind = _kind(mode, device, limits, build_root or "", tag)
    with _lock:
        current = _idle.get(kind)
        if current is not None and current.alive():
            return
        stale = [_idle.pop(kind)] if current is not None else []
        while len(_idle) >= _MAX_IDLE:
            stale.append(_idle.pop(next(iter(_idle))))
        with contextlib.suppress(OSError):  # no warm child: the next evaluation starts cold
            writable = (*writable_for(mode), *([build_root] if build_root else []))
            _idle[kind] = _spawner.submit(
                Child, mode, limits, warm_device=device, talk=mode in TALKING,
                writable=writable, watch_warm_up=watch_warm_up).result()
            if _held:
                _signal_group(_idle[kind], signal.SIGSTOP)
    for child in stale:
        child.discard()


def hold_idle() -> None:
    """A host window opens: every idle child is stopped until the last one closes
    (``release_idle``), so children warming up for the next evaluation (torch's import, seconds
    of CPU) never run beside a timed call, only between windows. Their whole process group
    (no candidate has run in them: none of their processes left it), never through their
    namespace's init, whose answers the evaluation that takes the child relies on."""
    global _held
    with _lock:
        _held += 1
        if _held == 1:
            for child in _idle.values():
                _signal_group(child, signal.SIGSTOP)


def release_idle() -> None:
    global _held
    with _lock:
        _held = max(0, _held - 1)
        if not _held:
            for child in _idle.values():
                _signal_group(child, signal.SIGCONT)


def _signal_group(child: Child, sig: signal.Signals) -> None:
    with contextlib.suppress(OSError):
        os.killpg(child.proc.pid, sig)


def discard_all() -> None:
    with _lock:
        children = list(_idle.values())
        _idle.clear()
    for child in children:
        child.discard()


def idle_modes() -> list[str]:
    """The modes of the live warm children, sorted (a diagnostic)."""
    with _lock:
        return sorted(c.mode for c in _idle.values() if c.alive())


def count() -> int:
    with _lock:
        return sum(1 for c in _idle.values() if c.alive())


atexit.register(discard_all)
