"""Names: session folders, record ids, candidate files."""

from __future__ import annotations

import re
import secrets
from datetime import UTC, datetime

MODULE_FILE = "model.py"  # the tracked, optimized module in the session's git repo
REFERENCE_FILE = "problem.py"  # the pristine reference, never modified
TRACE_FILE = "trace.jsonl"
CANDIDATES_DIR = "candidates"
LOCK_FILE = "session.lock"
EVENTS_FILE = "events.jsonl"  # when generations and timed evaluations ran (store.event_log)


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def slug(text: str, limit: int = 40) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_").lower()
    return cleaned[:limit] or "problem"


def new_session_id(problem_name: str, when: datetime | None = None) -> str:
    """A readable unique id, also the folder name: ``2026-11-21_0615_diag_matmul_ab12cd``."""
    stamp = (when or datetime.now(UTC)).strftime("%Y-%m-%d_%H%M")
    return f"{stamp}_{slug(problem_name)}_{secrets.token_hex(3)}"


def new_record_id(round_: int, slot: int) -> str:
    """``r003s1-9f2c4a``: the round and slot for people, a random tail for uniqueness."""
    return f"r{round_:03d}s{slot}-{secrets.token_hex(3)}"


def candidate_file(round_: int, slot: int, record_id: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", record_id)
    return f"r{round_:03d}_s{slot}_{safe}.py"
