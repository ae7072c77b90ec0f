"""The reference-alone bursts shared by consecutive evaluations of one problem (stdlib only).

The reference runner times the reference alone (the candidate not yet imported) before an
evaluation; that depends
only on the problem, the device, torch and the timing settings, so consecutive candidates of
one problem share one measurement. The cache lives in the launching process's memory (the app,
or one ``python -m cudal1_evaluator`` run), never on disk where candidate code could forge an entry,
and an entry expires after ``TTL_S``. A ``reference_slowed`` verdict judged against a reused
entry is judged again against a fresh one (``cudal1_evaluator.launch``).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Mapping

from cudal1_evaluator.parent.timing_checks import Burst
from cudal1_evaluator.schema import Job

TTL_S = 600.0
_MAX_ENTRIES = 64
_lock = threading.Lock()
_entries: dict[str, tuple[float, list[Burst]]] = {}


def key_of(job: Job, info: Mapping[str, object]) -> str:
    """Problem source, device (as the referee saw it), torch version and timing settings (the
    windows stored keep their calls: a reuse takes that size)."""
    versions = info.get("versions")
    parts = {
        "problem": hashlib.sha256(job.problem_source.encode("utf-8", "replace")).hexdigest(),
        "device": job.device, "device_info": info.get("device"),
        "torch": versions.get("torch", "") if isinstance(versions, dict) else "",
        "timing": [job.warmup, job.min_samples, job.max_samples, job.timing_budget_s,
                   job.stable_rel_ci, job.compare_torch_compile, job.memory_limit_mb,
                   job.window_cost],
    }
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def get(key: str) -> tuple[list[Burst], float] | None:
    """(the alone bursts, their age in seconds), or None when absent or expired."""
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


def put(key: str, bursts: list[Burst]) -> None:
    with _lock:
        _entries[key] = (time.monotonic(), bursts)
        while len(_entries) > _MAX_ENTRIES:
            del _entries[min(_entries, key=lambda k: _entries[k][0])]


def clear() -> None:
    with _lock:
        _entries.clear()
