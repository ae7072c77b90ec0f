"""``cudal1-tui FILE`` (alias ``open``): the Textual app on a problem file."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from cudal1_tui.cli.options import add_settings_flags, settings_from_args
from cudal1_tui.engine.shutdown import on_termination
from cudal1_tui.errors import ProblemError

if TYPE_CHECKING:
    from cudal1_tui.ui.app import CudaL1App

NAME = "open"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(NAME, help="open the app on a problem file (also: cudal1-tui FILE)")
    parser.add_argument("file", type=Path, help="a KernelBench-style problem file")
    parser.add_argument("--resume", metavar="SESSION", help="continue a session (id or path)")
    parser.add_argument("--sizes", choices=("auto", "full", "cpu"), default="auto",
                        help="problem sizes: the file's, or CPU-friendly ones (default: auto)")
    # Hidden: mount the app headless, print the time to the first frame in ms, exit.
    parser.add_argument("--measure-startup", action="store_true", help=argparse.SUPPRESS)
    add_settings_flags(parser)
    parser.set_defaults(handler=run)


def _close(app: CudaL1App, signum: int) -> None:
    try:
        app.call_from_thread(app.close_and_exit)
    except RuntimeError:  # no app running (not yet, or no more): nothing to save
        os._exit(128 + signum)


def run(args: argparse.Namespace) -> int:
    path: Path = args.file
    if not path.is_file():
        raise ProblemError(f"{path}: no such file",
                           fix="pass a KernelBench-style problem file, e.g. examples/relu.py")
    settings = settings_from_args(args).settings
    # Imported here so `cudal1-tui --help` and the other commands do not load Textual.
    from cudal1_tui.ui.app import CudaL1App

    app = CudaL1App(path.resolve(), settings, resume=args.resume, sizes=args.sizes,
                    measure_startup=args.measure_startup)
    on_termination(lambda signum: _close(app, signum))  # SIGTERM/SIGHUP: the normal exit
    code = app.run(headless=args.measure_startup)
    if args.measure_startup:
        print(f"first frame: {app.first_frame_ms:.0f} ms after the app was built "
              f"(at {app.first_frame_at:.6f})")
    return code if isinstance(code, int) else 0
