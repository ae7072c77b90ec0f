"""``cudal1-tui FILE`` (alias ``open``): the Textual app on a problem file.

The file's contract is checked statically first (the same check as ``inspect``, in well
under a second): a broken file is reported compiler-style (``file:line:col: error: …``)
with exit code 1 before any screen opens. On exit the session id is printed with the
commands that resume and export it.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from cudal1_tui.cli.options import add_settings_flags, settings_from_args
from cudal1_tui.cli.reporting import report
from cudal1_tui.cli.session_refs import LAST, resolve_ref
from cudal1_tui.config import Settings, sessions_dir
from cudal1_tui.engine.shutdown import (
    close_within,
    exit_now,
    on_termination,
    remove_own_temp_dirs,
)
from cudal1_tui.errors import Cudal1Error, ProblemError

if TYPE_CHECKING:
    from cudal1_tui.ui.app import CudaL1App

NAME = "open"
BROKEN_FILE = 1


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(NAME, help="open the app on a problem file (also: cudal1-tui FILE)")
    parser.add_argument("file", type=Path, help="a KernelBench-style problem file")
    parser.add_argument("--resume", metavar="SESSION", nargs="?", const=LAST,
                        help="continue a session (id or path); alone: this file's last session")
    parser.add_argument("--sizes", choices=("auto", "full", "cpu"), default="auto",
                        help="problem sizes: the file's, or CPU-friendly ones (default: auto)")
    # Hidden: mount the app headless, print the time to the first frame in ms, exit.
    parser.add_argument("--measure-startup", action="store_true", help=argparse.SUPPRESS)
    add_settings_flags(parser)
    parser.set_defaults(handler=run)


def static_errors(path: Path) -> list[str]:
    """``file:line:col: error: …`` lines for a file that breaks the problem contract."""
    from cudal1_tui.problem.inspect import inspect_source
    from cudal1_tui.problem.problem_file import read_source

    inspection = inspect_source(read_source(path), str(path))
    return [issue.render(str(path)) for issue in inspection.errors]


def exit_line(session_id: str, session_path: str, problem: Path) -> str:
    """What to do next with the session the app had open when it closed (``o`` may have
    opened another problem's): the resume line names that session, never "the newest"."""
    return (f"session {session_id} saved in {session_path}\n"
            f"  resume: cudal1-tui {shown_path(problem)} --resume {session_id}\n"
            f"  export: cudal1-tui export {session_id} --format trl -o data.jsonl")


def shown_path(path: Path) -> Path:
    """``path`` relative to the working directory when it is under it (as typed), else as is."""
    try:
        return path.resolve().relative_to(Path.cwd())
    except ValueError:
        return path


EXIT_GRACE_S = 30.0  # SIGTERM: the app's own exit, or the process ends anyway after this
CLOSE_LIMIT_S = 20.0  # closing the session (the running stage cancelled) within this


def _close(app: CudaL1App, signum: int) -> None:
    """SIGTERM: the normal exit (session saved, the exit line printed), bounded in time;
    SIGHUP (the terminal went away): save and leave at once, drawing nothing."""
    if signum != signal.SIGHUP:
        try:
            app.call_from_thread(app.close_and_exit)
        except RuntimeError:  # no app running (not yet, or no more): nothing to save
            exit_now(128 + signum)
        time.sleep(EXIT_GRACE_S)  # the app's exit ends the process before this returns
    close_within(app.runner.close, CLOSE_LIMIT_S)
    exit_now(128 + signum)


def run(args: argparse.Namespace) -> int:
    path: Path = args.file
    if not path.is_file():
        raise ProblemError(f"{path}: no such file",
                           fix="pass a KernelBench-style problem file, e.g. examples/relu.py")
    errors = [] if args.measure_startup else static_errors(path)
    if errors:
        print("\n".join(errors), file=sys.stderr)
        print(f"fix the file (`cudal1-tui inspect {path}` shows the expected format)",
              file=sys.stderr)
        return BROKEN_FILE
    effective = settings_from_args(args)
    settings = effective.settings
    resume = args.resume
    if resume is not None:
        resume = resolve_ref(resume, sessions_dir(settings), problem=path.stem)
    if not args.measure_startup:  # a resumed session's problem too: it may have broken since
        on_termination(lambda signum: exit_now(128 + signum))  # no session open: nothing to save
        failed = _probe_first(path, settings, args.sizes)
        if failed is not None:
            report(failed)
            return BROKEN_FILE
    # Imported here so `cudal1-tui --help` and the other commands do not load Textual.
    from cudal1_tui.ui.app import CudaL1App

    app = CudaL1App(path.resolve(), settings, resume=resume, sizes=args.sizes,
                    measure_startup=args.measure_startup, config_path=effective.config_path)
    on_termination(lambda signum: _close(app, signum))  # SIGTERM/SIGHUP: the normal exit
    code = app.run(headless=args.measure_startup)
    if args.measure_startup:
        print(f"first frame: {app.first_frame_ms:.0f} ms after the app was built "
              f"(at {app.first_frame_at:.6f})")
    elif app.closed_session is not None:
        print(exit_line(*app.closed_session, app.problem_path))
    if app.open_error is not None:  # the session never opened (a resumed one's probe failed)
        report(app.open_error)
    remove_own_temp_dirs()  # the runner is closed: no child of ours uses them any more
    return code if isinstance(code, int) else 0


def _probe_first(path: Path, settings: Settings, sizes: str) -> Cudal1Error | None:
    """The session's probe, before any screen: a reference that fails it is reported like a
    broken file (the session's opening reuses the passed probe)."""
    from cudal1_tui.engine.preflight import preflight

    print(f"probing {path}…", file=sys.stderr, flush=True)
    try:
        return preflight(path, settings, sizes)
    except Cudal1Error as exc:
        return exc
