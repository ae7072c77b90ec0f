"""One problem of a headless run, on a thread of its own: open, rounds, close, its row.

A problem that cannot open (a broken file, a failed probe) or that produced no candidate is
reported under its name and ends with exit code 1; the other problems go on. A cancel (Ctrl-C,
SIGTERM) stops its running stage; the session is closed intact.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from cudal1_tui.config import Settings
from cudal1_tui.engine.acceptance import accept_best
from cudal1_tui.engine.engine import Engine
from cudal1_tui.engine.events import EngineError, EngineEvent
from cudal1_tui.engine.fleet import Fleet
from cudal1_tui.engine.round import RoundSummary
from cudal1_tui.errors import Cudal1Error
from cudal1_tui.present.speedup import NO_SPEEDUP, speed_text
from cudal1_tui.records import CandidateRecord

EXIT_OK, EXIT_ERROR = 0, 1
NOTHING_FIX = "check the model server (`cudal1-tui doctor`) and the messages above"
Sizes = Literal["auto", "full", "cpu"]


@dataclass
class Options:
    rounds: int = 3
    resume: str | None = None
    accept_best: bool = False
    sizes: Sizes = "auto"
    gpus: list[int] | None = None  # host GPUs to time on (None: all of them)
    cluster: str | None = None  # a Ray address, ``local``, or None (RAY_ADDRESS decides)
    parallel: int = 0  # problems in flight at once; 0: enough to keep every lane busy
    report_json: Path | None = None


@dataclass
class Failure:
    message: str
    fix: str = ""


def _first_line(text: str, limit: int = 120) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[:limit - 1] + "…"


@dataclass
class ProblemRun:
    """One problem's engine on its worker thread; ``code`` and ``row`` once ``done``."""

    path: Path
    name: str
    settings: Settings
    options: Options
    fleet: Fleet
    emit: Callable[[EngineEvent], None]
    engine: Engine | None = None
    code: int = EXIT_OK
    failure: Failure | None = None
    records: list[CandidateRecord] = field(default_factory=list)
    best: CandidateRecord | None = None
    before: int = 0  # records the session had before this run (a resumed one)
    error: BaseException | None = None  # a bug: re-raised in the main thread
    stop: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self, finished: Callable[[], None] | None = None) -> None:
        """The problem's rounds; ``finished`` (reporting its end) runs before ``done`` is set."""
        try:
            if not self.stop.is_set():
                self._run()
        except Cudal1Error as exc:
            self.failure, self.code = Failure(exc.message, exc.fix), EXIT_ERROR
        except BaseException as exc:
            self.error, self.code = exc, EXIT_ERROR
        finally:
            self._close()
            try:
                if finished is not None:
                    finished()
            finally:
                self.done.set()

    def cancel(self) -> None:
        self.stop.set()
        with self._lock:
            engine = self.engine
        if engine is not None:
            engine.cancel()

    def _run(self) -> None:
        engine = Engine(self.path, self.settings, emit=self.emit, resume=self.options.resume,
                        sizes=self.options.sizes, fleet=self.fleet)
        with self._lock:
            self.engine = engine
        engine.open()
        before = self.before = len(engine.records())
        for _ in range(self.options.rounds):
            if self.stop.is_set() or engine.stop_requested:
                break
            summary = engine.run_round()
            if self.options.accept_best:
                self._accept_best(engine, summary)
            if summary.cancelled or summary.nothing_to_do:
                break
        self.records = engine.records()
        if len(self.records) <= before and not self.stop.is_set():
            why = f": {engine.last_error}" if engine.last_error else ""
            self.failure = Failure(f"the run produced no candidate{why}", NOTHING_FIX)
            self.code = EXIT_ERROR

    def _accept_best(self, engine: Engine, summary: RoundSummary) -> None:
        """A failed accept (git trouble) is reported; the remaining rounds still run."""
        try:
            accept_best(engine, summary)
        except Cudal1Error as exc:
            engine.emit(EngineError(f"accepting the round's best failed: {exc.message}",
                                    exc.fix, summary.round, True))

    def _close(self) -> None:
        engine = self.engine
        if engine is None:
            return
        if engine.session_path is not None:
            self.records, self.best = engine.records(), engine.best()
        engine.close()

    @property
    def new_records(self) -> list[CandidateRecord]:
        return self.records[self.before:]

    def row(self) -> dict[str, str]:
        engine, best = self.engine, self.best
        opened = engine is not None and engine.session_path is not None
        return {
            "problem": self.name,
            "candidates": str(len(self.records)) if opened else "—",
            "ok": str(sum(r.status == "ok" for r in self.records)) if opened else "—",
            "best": speed_text(best.speedup) if best else NO_SPEEDUP,
            "source": best.source if best else "—",
            "session": str(engine.session_path or "") if engine is not None else "",
            "note": f"error: {_first_line(self.failure.message)}" if self.failure else "",
        }
