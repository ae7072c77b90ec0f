"""``events.jsonl``: when the model generated and when candidates were timed, in order.

One JSON object per line: ``{"event": "generation_started", "t": <wall clock s>, "pid": …,
…}``. Lines are written in the order the engine's GPU-share gate changed state (the gate
writes them while it holds its lock), so the file's order alone shows whether a timed
evaluation ever ran while a generation was in flight (``overlaps``); the wall-clock stamps
let a reader line the file up with a server's own log. A line that cannot be written is
dropped: the log is evidence, never a reason for a session to fail.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from cudal1_tui.records import JsonObject

log = logging.getLogger(__name__)

GENERATION_STARTED, GENERATION_ENDED = "generation_started", "generation_ended"
TIMING_STARTED, TIMING_ENDED = "timing_started", "timing_ended"


class EventLog:
    """Appends events to one file; safe to call from several threads."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def write(self, event: str, **fields: object) -> None:
        row = {"event": event, "t": round(time.time(), 6), "pid": os.getpid(), **fields}
        line = json.dumps(row, default=str) + "\n"
        with self._lock:
            try:
                with self.path.open("a", encoding="utf-8") as out:
                    out.write(line)
            except OSError as exc:
                log.warning("could not write %s: %s", self.path, exc)


def read_events(path: Path) -> list[JsonObject]:
    """Every well-formed line (a torn last line is skipped)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    rows: list[JsonObject] = []
    for line in lines:
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict):
            rows.append(row)
    return rows


@dataclass(frozen=True)
class Overlap:
    """A timed evaluation that started or ran while a generation was in flight."""

    line: int  # 1-based line of the event that made the overlap
    timing: str  # the record ids being timed
    generating: str  # the generations in flight


def overlaps(rows: list[JsonObject]) -> list[Overlap]:
    """Every point in the log where a timing and a generation were both in flight."""
    generating: dict[str, JsonObject] = {}
    timing: dict[str, JsonObject] = {}
    found: list[Overlap] = []
    for number, row in enumerate(rows, start=1):
        event = row.get("event")
        key = f"{row.get('pid')}:{row.get('id')}"
        if event == GENERATION_STARTED:
            generating[key] = row
        elif event == GENERATION_ENDED:
            generating.pop(key, None)
        elif event == TIMING_STARTED:
            timing[key] = row
        elif event == TIMING_ENDED:
            timing.pop(key, None)
        if generating and timing and event in (GENERATION_STARTED, TIMING_STARTED):
            found.append(Overlap(number, ", ".join(sorted(timing)),
                                 ", ".join(sorted(generating))))
    return found
