"""Owns the engine for the app: builds it, serialises its blocking calls.

Every method here blocks and runs on a worker thread, never on the UI thread.
``cancel`` is the exception: the engine's cancel is thread-safe and must get
through while a round holds the lock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from cudal1_tui.errors import SessionError
from cudal1_tui.records import CandidateRecord
from cudal1_tui.session_cleanup import remove_session
from cudal1_tui.ui.engine_port import Emit, EngineFactory, EnginePort

T = TypeVar("T")


class EngineRunner:
    def __init__(self, factory: EngineFactory, emit: Emit) -> None:
        self._factory = factory
        self._emit = emit
        self._lock = threading.Lock()
        self._engine: EnginePort | None = None
        self._busy = threading.Event()
        self._fresh = False  # the open engine made a new session (not a resumed one)

    @property
    def engine(self) -> EnginePort | None:
        return self._engine

    @property
    def busy(self) -> bool:
        """A round (or several) is running."""
        return self._busy.is_set()

    def open(self, problem_path: Path, resume: str | Path | None) -> EnginePort:
        with self._lock:
            self._close_locked()
            engine = self._factory(problem_path, resume, self._emit)
            self._engine = engine
            self._fresh = resume is None
            try:
                engine.open()
            except BaseException:  # no half-open engine: "n" must not reach it
                self._close_locked()
                raise
            return engine

    def call(self, fn: Callable[[EnginePort], T]) -> T:
        with self._lock:
            return fn(self._require())

    def rounds(self, n: int) -> int:
        """Run ``n`` rounds; return how many summaries came back."""
        self._busy.set()
        try:
            with self._lock:
                engine = self._require()
                if n == 1:
                    engine.run_round()
                    return 1
                return len(engine.run_rounds(n))
        finally:
            self._busy.clear()

    def records(self) -> list[CandidateRecord] | None:
        """The session's records; None while no session is open."""
        engine = self._engine
        return engine.records() if engine is not None else None

    def cancel(self) -> bool:
        engine = self._engine
        if engine is None or not self.busy:
            return False
        engine.cancel()
        return True

    def cancel_slot(self, slot: int) -> bool:
        """Stop one model slot's stream of the running round; thread-safe like ``cancel``."""
        engine = self._engine
        return engine is not None and self.busy and engine.cancel_slot(slot)

    def close(self) -> None:
        self.cancel()
        with self._lock:
            self._close_locked()

    def _close_locked(self) -> None:
        """Close the engine; a new session that never got a candidate is not kept."""
        engine, self._engine = self._engine, None
        if engine is None:
            return
        empty = self._fresh and engine.session_path is not None and not _has_records(engine)
        engine.close()
        if empty and engine.session_path is not None:
            remove_session(Path(engine.session_path))

    def _require(self) -> EnginePort:
        if self._engine is None:
            raise SessionError("no session is open yet", fix="wait for the session to open")
        return self._engine


def _has_records(engine: EnginePort) -> bool:
    try:
        return bool(engine.records())
    except Exception:  # an unreadable session is kept for the user to look at
        return True
