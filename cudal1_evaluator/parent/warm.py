"""Warm children kept ready for the next evaluation (stdlib only; the parent's side).

At most one idle child per kind (mode, device, fixed limits, scrubbed environment; the memory
and CPU-time limits travel with the job); a child is used once. ``enabled = False`` turns it
off (one-shot command lines). Warm children never saw a job: they are as pristine as cold ones,
only earlier.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import threading
from pathlib import Path

from cudal1_evaluator.isolation.child_env import scrub_env
from cudal1_evaluator.isolation.sandbox import Child, Limits
from cudal1_evaluator.isolation.sandbox_layers import writable_for

enabled = True
_MAX_IDLE = 5  # two runners, a referee and a profile child per device, and one spare
TALKING = ("run", "referee")  # children driven by the parent's protocol (a talk socket)
_lock = threading.Lock()
_idle: dict[str, Child] = {}


def _kind(mode: str, device: str, limits: Limits, build_root: str, tag: str = "") -> str:
    placeholder = Path("/nonexistent")
    env = scrub_env(dict(os.environ), home=placeholder, tmpdir=placeholder)
    # memory and CPU-time limits are sent with the job: only what is fixed at start counts
    fixed = (limits.address_space, limits.nofile, limits.fsize_mb)
    text = repr((mode, tag, device, fixed, build_root, sorted(env.items())))
    return hashlib.sha256(text.encode()).hexdigest()


def take(mode: str, device: str, limits: Limits, job_text: str,
         build_root: str | None = None, tag: str = "") -> Child | None:
    """A live warm child of this kind whose sandbox covers the job's build dir, removed from
    the pool, or None (then the caller starts a cold one). The one place a warm child's
    coverage is checked: a child that cannot write where the job builds is never handed out."""
    with _lock:
        child = _idle.pop(_kind(mode, device, limits, build_root or "", tag), None)
    if child is not None and not (child.alive() and child.covers(job_text)):
        child.discard()
        return None
    return child


def prepare(mode: str, device: str, limits: Limits, build_root: str | None = None,
            tag: str = "") -> None:
    """Start a warm child of this kind unless one is waiting already; its sandbox may write
    ``build_root``, where the next job of this kind builds."""
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
            _idle[kind] = Child(mode, limits, warm_device=device, talk=mode in TALKING,
                                writable=writable)
    for child in stale:
        child.discard()


def discard_all() -> None:
    with _lock:
        children = list(_idle.values())
        _idle.clear()
    for child in children:
        child.discard()


def count() -> int:
    with _lock:
        return sum(1 for c in _idle.values() if c.alive())


atexit.register(discard_all)
