"""What an engine emits, collected from any thread, for the engine and pool tests."""

from __future__ import annotations

import threading
from typing import Any

from cudal1_tui.engine.events import CandidateFinished, StageChanged


class Events:
    """Every event, in order; ``hooks`` see each one as it arrives."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self.lock = threading.Lock()
        self.hooks: list[Any] = []

    def __call__(self, event: Any) -> None:
        with self.lock:
            self.items.append(event)
        for hook in list(self.hooks):
            hook(event)

    def of(self, kind: type) -> list[Any]:
        with self.lock:
            return [e for e in self.items if isinstance(e, kind)]

    def stages(self, slot: int) -> list[tuple[int, StageChanged]]:
        return [(i, e) for i, e in enumerate(self.items)
                if isinstance(e, StageChanged) and e.round > 0 and e.slot == slot]

    def finished_at(self, slot: int) -> int:
        return next(i for i, e in enumerate(self.items)
                    if isinstance(e, CandidateFinished) and e.slot == slot)
