"""``cudal1-tui run FILE... --headless``: the engine's loop without a screen.

Progress goes to stderr, the summary table to stdout. The rounds run on a worker
thread so that Ctrl-C lands in the main thread at a clean point: the engine is
cancelled, the running stage stops, the session is closed intact, exit code 130.
SIGTERM and SIGHUP end the run the same way (exit 143 and 129). A run that produced no
candidate at all (every model call failed, nothing evaluated) exits 1 and says why.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.text import Text

from cudal1_tui.config import Settings
from cudal1_tui.engine.acceptance import accept_best
from cudal1_tui.engine.engine import Engine, Sizes
from cudal1_tui.engine.events import EngineError
from cudal1_tui.engine.round import RoundSummary
from cudal1_tui.engine.shutdown import Terminated, raising_on_termination
from cudal1_tui.errors import Cudal1Error, compiler_style
from cudal1_tui.present.run_progress import HeadlessProgress, summary_table
from cudal1_tui.present.speedup import NO_SPEEDUP, speed_text

EXIT_OK, EXIT_ERROR, EXIT_INTERRUPTED = 0, 1, 130
NOTHING_FIX = "check the model server (`cudal1-tui doctor`) and the messages above"


@dataclass
class Options:
    rounds: int = 3
    resume: str | None = None
    accept_best: bool = False
    sizes: Sizes = "auto"


@dataclass
class _Worker:
    engine: Engine
    options: Options
    error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        try:
            for _ in range(self.options.rounds):
                if self.engine.stop_requested:
                    break
                summary = self.engine.run_round()
                if self.options.accept_best:
                    self._accept_best(summary)
                if summary.cancelled or summary.nothing_to_do:
                    break
        except BaseException as exc:  # re-raised in the main thread
            self.error = exc
        finally:
            self.done.set()

    def _accept_best(self, summary: RoundSummary) -> None:
        """A failed accept (git trouble) is reported; the remaining rounds still run."""
        try:
            accept_best(self.engine, summary)
        except Cudal1Error as exc:
            self.engine.emit(EngineError(f"accepting the round's best failed: {exc.message}",
                                         exc.fix, summary.round, True))


def _row(engine: Engine) -> dict[str, str]:
    records = engine.records()
    best = engine.best()
    return {
        "problem": engine.problem_name,
        "candidates": str(len(records)),
        "ok": str(sum(r.status == "ok" for r in records)),
        "best": speed_text(best.speedup) if best else NO_SPEEDUP,
        "source": best.source if best else "—",
        "session": str(engine.session_path or ""),
    }


def _run_one(path: Path, settings: Settings, options: Options, err: Console,
             rows: list[dict[str, str]]) -> int:
    progress = HeadlessProgress(err, problem=path.stem)
    engine = Engine(path, settings, emit=progress, resume=options.resume, sizes=options.sizes)
    try:
        progress.start()
        engine.open()
        worker = _Worker(engine, options)
        thread = threading.Thread(target=worker.run, name="rounds", daemon=True)
        thread.start()
        before = len(engine.records())
        try:
            while not worker.done.wait(0.2):
                pass
        except (KeyboardInterrupt, Terminated):
            engine.cancel()
            worker.done.wait()
            rows.append(_row(engine))
            raise
        if worker.error is not None:
            raise worker.error
        rows.append(_row(engine))
        return EXIT_OK if len(engine.records()) > before else _nothing(engine, err)
    finally:
        progress.stop()
        engine.close()


def _nothing(engine: Engine, err: Console) -> int:
    why = f": {engine.last_error}" if engine.last_error else ""
    err.print(Text.assemble(("error: ", "bold red"),
                            f"{engine.problem_name}: the run produced no candidate{why}"))
    err.print(f"fix: {NOTHING_FIX}", highlight=False, markup=False)
    return EXIT_ERROR


def _console(*, stderr: bool) -> Console:
    """Logs and CI (no terminal) get long lines instead of wrapping at 80 columns."""
    console = Console(stderr=stderr)
    return console if console.is_terminal else Console(stderr=stderr, width=200)


def run_headless(files: list[Path], settings: Settings, options: Options,
                 *, out: Console | None = None, err: Console | None = None) -> int:
    out = out or _console(stderr=False)
    err = err or _console(stderr=True)
    if options.resume and len(files) != 1:
        err.print("[bold red]error:[/] --resume continues one session: pass exactly one FILE")
        return EXIT_ERROR
    rows: list[dict[str, str]] = []
    with raising_on_termination():
        code = _run_all(files, settings, options, err, rows)
    if rows:
        out.print(summary_table(rows))
    return code


def _run_all(files: list[Path], settings: Settings, options: Options, err: Console,
             rows: list[dict[str, str]]) -> int:
    code = EXIT_OK
    for path in files:
        try:
            result = _run_one(path, settings, options, err, rows)
        except Cudal1Error as exc:
            head = "" if compiler_style(exc.message) else "error: "
            err.print(Text.assemble((head, "bold red"), exc.message))
            if exc.fix:
                err.print(f"fix: {exc.fix}", highlight=False, markup=False)
            code = EXIT_ERROR
            continue
        except KeyboardInterrupt:
            err.print("interrupted; the session is saved.")
            return EXIT_INTERRUPTED
        except Terminated as stop:
            err.print(f"terminated ({stop}); the session is saved.")
            return stop.exit_code
        code = max(code, result)
    return code
