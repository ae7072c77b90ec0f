"""Pristine-reference timings shared by consecutive evaluations of one problem (stdlib only).

The pristine process never sees a candidate, so its timing depends only on the problem, the
device, torch and the timing settings: consecutive candidates of one problem can share one
measurement. The cache lives in the launching process's memory (the app, or one
``python -m evaluator`` run), never on disk where candidate code could forge an entry, and an
entry expires after ``TTL_S``. A candidate whose in-process reference disagrees with the cached
measurement gets a fresh one before any ``reference_slowed`` verdict.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time

from evaluator.report import WorkerReport
from evaluator.schema import Job
from evaluator.stats import summarize
from evaluator.verdict import reference_slowed

TTL_S = 600.0
_MAX_ENTRIES = 64
_lock = threading.Lock()
_entries: dict[str, tuple[float, WorkerReport]] = {}


def key_of(job: Job, report: WorkerReport) -> str:
    """Problem source, device (as the worker saw it), torch version and timing settings."""
    parts = {
        "problem": hashlib.sha256(job.problem_source.encode("utf-8", "replace")).hexdigest(),
        "device": job.device, "device_info": report.device,
        "torch": report.versions.get("torch", ""),
        "timing": [job.warmup, job.min_samples, job.max_samples, job.timing_budget_s,
                   job.stable_rel_ci, job.compare_torch_compile, job.memory_limit_mb],
    }
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def get(key: str) -> tuple[WorkerReport, float] | None:
    """(the pristine report, its age in seconds), or None when absent or expired."""
    now = time.monotonic()
    with _lock:
        found = _entries.get(key)
        if found is None:
            return None
        stored, report = found
        if now - stored > TTL_S:
            del _entries[key]
            return None
        return report, now - stored


def put(key: str, report: WorkerReport) -> None:
    with _lock:
        _entries[key] = (time.monotonic(), report)
        while len(_entries) > _MAX_ENTRIES:
            del _entries[min(_entries, key=lambda k: _entries[k][0])]


def clear() -> None:
    with _lock:
        _entries.clear()


def disagrees(report: WorkerReport, pristine: WorkerReport) -> bool:
    """The in-process reference is clearly slower, or clearly faster, than the cached pristine
    one: measure afresh (a slow cached entry would hide a slowed reference)."""
    mine, theirs = report.timing.get("reference"), pristine.timing.get("reference")
    if mine is None or theirs is None:
        return True
    inproc = summarize(mine.samples_ms, mine.clock)
    clean = summarize(theirs.samples_ms, theirs.clock)
    if inproc.n == 0 or clean.n == 0:
        return True
    return reference_slowed(inproc, clean) is not None or \
        reference_slowed(clean, inproc) is not None
