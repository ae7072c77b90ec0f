"""What the app needs from the engine, and how it builds one.

The app takes a factory so tests can point the engine at temp directories and
a local replay server; the real engine is imported only when a session opens,
on a worker thread, so the first frame never waits for it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, Protocol

from cudal1_tui.config import Settings
from cudal1_tui.engine.events import EngineEvent
from cudal1_tui.records import CandidateRecord

Sizes = Literal["auto", "full", "cpu"]
Emit = Callable[[EngineEvent], None]


class EnginePort(Protocol):
    session_id: str
    session_path: Path | None
    problem_name: str
    problem_source: str
    reference_ms: float | None
    torch_compile_ms: float | None
    device: str

    def open(self) -> None: ...
    def run_round(self) -> Any: ...
    def run_rounds(self, n: int) -> list[Any]: ...
    def cancel(self) -> None: ...
    def cancel_slot(self, slot: int) -> bool: ...
    def accept(self, record_id: str) -> str: ...
    def reject(self, record_id: str) -> None: ...
    def undo(self) -> str | None: ...
    def records(self) -> list[CandidateRecord]: ...
    def update_settings(self, **changes: Any) -> None: ...
    def close(self) -> None: ...


class EngineFactory(Protocol):
    def __call__(
        self, problem_path: Path, resume: str | Path | None, emit: Emit
    ) -> EnginePort: ...


def real_engine_factory(settings: Settings, sizes: Sizes = "auto") -> EngineFactory:
    def build(problem_path: Path, resume: str | Path | None, emit: Emit) -> EnginePort:
        from cudal1_tui.engine.engine import Engine

        engine: EnginePort = Engine(problem_path, settings, emit=emit, resume=resume, sizes=sizes)
        return engine

    return build
