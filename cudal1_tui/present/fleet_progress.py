"""The progress of many problems at once (``cudal1-tui run DIR --headless``).

On a terminal: a live table, one row per problem (round, what its slots are doing, candidates,
verified ones, best speedup) under a header naming the lanes and the throughput; verdicts
and errors scroll above it. Without a terminal (CI, logs): plain lines, each naming its
problem. Thread-safe: engines emit from their worker threads.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from cudal1_tui.engine.events import EngineEvent
from cudal1_tui.engine.lanes import LaneUse
from cudal1_tui.present.run_progress import HeadlessProgress
from cudal1_tui.present.speedup import speed_text

Usage = Callable[[], list[LaneUse]]


def per_minute(count: int, elapsed_s: float) -> float:
    return count * 60.0 / elapsed_s if elapsed_s > 0 else 0.0


@dataclass
class FleetProgress:
    console: Console
    label: str  # where evaluations run
    usage: Usage
    problems: dict[str, HeadlessProgress] = field(default_factory=dict)
    states: dict[str, str] = field(default_factory=dict)  # waiting, open, done, error
    live: Live | None = None
    started: float = field(default_factory=time.monotonic)
    _lock: threading.RLock = field(default_factory=threading.RLock)

    def start(self) -> None:
        self.console.print(f"evaluating on {self.label}", highlight=False, markup=False)
        if self.console.is_terminal:
            self.live = Live(self._render(), console=self.console, refresh_per_second=4,
                             transient=True, get_renderable=self._render)
            self.live.start()

    def stop(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None

    def emitter(self, name: str) -> Callable[[EngineEvent], None]:
        """The ``emit`` of one problem's engine."""
        with self._lock:
            view = HeadlessProgress(self.console, problem=name, quiet=self.live is not None,
                                    tag_slots=True)
            self.problems[name] = view
            self.states.setdefault(name, "waiting")

        def emit(event: EngineEvent) -> None:
            with self._lock:
                view(event)

        return emit

    def state(self, name: str, state: str) -> None:
        with self._lock:
            self.states[name] = state

    # -- the live table ------------------------------------------------------------------

    def _header(self) -> Text:
        elapsed = time.monotonic() - self.started
        lanes = self.usage()
        busy = sum(u.busy_s for u in lanes)
        total = sum(v.candidates for v in list(self.problems.values()))
        share = busy / (elapsed * len(lanes)) if elapsed > 0 and lanes else 0.0
        return Text(f"{self.label} · {elapsed:.0f} s · {total} candidate(s), "
                    f"{per_minute(total, elapsed):.1f}/min · lanes busy {share:.0%}",
                    style="bold")

    def _render(self) -> Group:
        """Called by the Live's refresh thread, which holds the console: it takes no lock of
        ours (an emitter printing under our lock waits for the console), reading copies."""
        table = Table(box=None, pad_edge=False)
        for column in ("problem", "round", "now", "cand.", "ok", "best"):
            table.add_column(column)
        for name, view in list(self.problems.items()):
            table.add_row(name, str(view.round or ""), self._now(name, view),
                          str(view.candidates), str(view.ok), speed_text(view.best))
        return Group(self._header(), table)

    def _now(self, name: str, view: HeadlessProgress) -> str:
        state = self.states.get(name, "")
        if state != "open":
            return state
        stages = Counter(s.stage for s in list(view.slots.values()) if s.stage)
        return ", ".join(f"{n} {stage}" for stage, n in sorted(stages.items())) or "…"
