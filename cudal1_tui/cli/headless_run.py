"""``cudal1-tui run DIR_OR_FILES... --headless``: the engine's loop without a screen, for
one problem or many at once.

Every problem gets its own session and engine on a worker thread; they share one fleet
(``engine.fleet``): the build threads and the timing lanes, one per GPU of the host
(``--gpus``), the CPU's one lane, or a Ray cluster (``--cluster``/``RAY_ADDRESS``). A round's
model slots stream concurrently, and several problems' rounds overlap, so a batching server
(vLLM, SGLang) sees many requests at once and the lanes stay busy. A problem that breaks
(a bad file, a failed probe, no candidate) is reported under its name; the others go on.

Progress goes to stderr (a live table on a terminal, plain lines otherwise), the summary
table to stdout. Ctrl-C lands in the main thread: every engine is cancelled, running
stages stop, sessions are closed intact, exit code 130. SIGTERM and SIGHUP end the run the
same way (exit 143 and 129). A problem that produced no candidate makes the exit code 1.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path

from rich.console import Console
from rich.text import Text

from cudal1_tui.cli.problem_files import expand
from cudal1_tui.cli.problem_worker import EXIT_ERROR, EXIT_OK, Options, ProblemRun
from cudal1_tui.cli.run_report import build_report
from cudal1_tui.config import Settings
from cudal1_tui.engine.fleet import Fleet, make_fleet
from cudal1_tui.engine.opening import sweep_leftovers
from cudal1_tui.engine.shutdown import Terminated, raising_on_termination
from cudal1_tui.errors import Cudal1Error, compiler_style
from cudal1_tui.present.fleet_progress import FleetProgress
from cudal1_tui.present.run_progress import summary_table

EXIT_INTERRUPTED = 130
__all__ = ["EXIT_ERROR", "EXIT_INTERRUPTED", "EXIT_OK", "Options", "run_headless"]


def _console(*, stderr: bool) -> Console:
    """Logs and CI (no terminal) get long lines instead of wrapping at 80 columns."""
    console = Console(stderr=stderr)
    return console if console.is_terminal else Console(stderr=stderr, width=200)


def _error(err: Console, message: str, fix: str = "") -> None:
    head = "" if compiler_style(message) else "error: "  # "file:line: error: ..." already
    err.print(Text.assemble((head, "bold red"), message))
    if fix:
        err.print(f"fix: {fix}", highlight=False, markup=False)


def _names(files: list[Path]) -> list[str]:
    """Each problem's name in the views: its stem, with its folder where stems repeat."""
    stems = [f.stem for f in files]
    return [f.stem if stems.count(f.stem) == 1 else f"{f.parent.name}/{f.stem}" for f in files]


def _width(options: Options, fleet: Fleet, problems: int) -> int:
    """Problems in flight: enough that every lane has candidates waiting while other
    problems' replies stream (two per lane, at least four), never more than there are."""
    wanted = options.parallel or max(4, 2 * fleet.width)
    return max(1, min(wanted, problems))


def run_headless(paths: list[Path], settings: Settings, options: Options,
                 *, out: Console | None = None, err: Console | None = None) -> int:
    out = out or _console(stderr=False)
    err = err or _console(stderr=True)
    listed = expand(paths)
    for path in listed.missing:
        _error(err, f"{path}: no such file or directory", "name problem files or folders")
    for path in listed.empty:
        _error(err, f"{path}: no problem file (*.py) in this folder")
    code = EXIT_ERROR if listed.missing or listed.empty else EXIT_OK
    if options.resume and len(listed.files) != 1:
        _error(err, "--resume continues one session: pass exactly one FILE")
        return EXIT_ERROR
    if not listed.files:
        return EXIT_ERROR
    try:
        fleet = make_fleet(settings.device, options.gpus, options.cluster)
    except Cudal1Error as exc:
        _error(err, exc.message, exc.fix)
        return EXIT_ERROR
    try:
        with raising_on_termination():
            return max(code, _run_all(listed.files, settings, options, fleet, out, err))
    finally:
        fleet.close()


def _run_all(files: list[Path], settings: Settings, options: Options, fleet: Fleet,
             out: Console, err: Console) -> int:
    settings = dataclasses.replace(settings, device=fleet.device)
    sweep_leftovers(settings)  # once, before any problem's children run
    progress = FleetProgress(err, fleet.label, fleet.usage)
    runs = [ProblemRun(path, name, settings, options, fleet, progress.emitter(name))
            for path, name in zip(files, _names(files), strict=True)]
    started = time.monotonic()
    progress.start()
    try:
        code = _drive(runs, _width(options, fleet, len(runs)), progress, err)
    finally:
        progress.stop()
    _finish(runs, fleet, time.monotonic() - started, options, out, err)
    return code


def _drive(runs: list[ProblemRun], width: int, progress: FleetProgress, err: Console) -> int:
    """Run the problems, ``width`` at a time; the main thread waits (and takes Ctrl-C)."""
    gate = threading.BoundedSemaphore(width)
    feeder = threading.Thread(target=_feed, args=(runs, gate, progress), name="problems",
                              daemon=True)
    feeder.start()
    try:
        while not all(run.done.wait(0.2) for run in runs):
            pass
    except KeyboardInterrupt:
        _cancel_all(runs)
        err.print("interrupted; the session is saved.")
        return EXIT_INTERRUPTED
    except Terminated as stop:
        _cancel_all(runs)
        err.print(f"terminated ({stop}); the session is saved.")
        return stop.exit_code
    for run in runs:
        if run.error is not None:
            raise run.error
    return max(run.code for run in runs)


def _feed(runs: list[ProblemRun], gate: threading.BoundedSemaphore,
          progress: FleetProgress) -> None:
    for run in runs:
        gate.acquire()
        progress.state(run.name, "open")

        def one(run: ProblemRun = run) -> None:
            try:
                run.run(finished=lambda: _reported(run, progress))
            finally:
                gate.release()

        threading.Thread(target=one, name=f"problem-{run.name}", daemon=True).start()


def _reported(run: ProblemRun, progress: FleetProgress) -> None:
    """A problem's end on the progress view, its failure said (before the run counts as done:
    the main thread may exit right after)."""
    progress.state(run.name, "error" if run.failure else "done")
    if run.failure is not None:  # a compiler-style line names its file already
        message = run.failure.message
        _error(progress.console, message if compiler_style(message)
               else f"{run.name}: {message}", run.failure.fix)


def _cancel_all(runs: list[ProblemRun]) -> None:
    for run in runs:
        run.cancel()
    for run in runs:
        run.done.wait()


def _finish(runs: list[ProblemRun], fleet: Fleet, elapsed_s: float, options: Options,
            out: Console, err: Console) -> None:
    del err  # each failure was reported as it happened
    report = build_report(fleet, elapsed_s, {r.name: r.new_records for r in runs})
    if options.report_json is not None:
        report.write(options.report_json)
    rows = [run.row() for run in runs]
    caption = report.caption() if len(runs) > 1 else ""
    out.print(summary_table(rows, caption))
