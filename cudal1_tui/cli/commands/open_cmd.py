"""``cudal1-tui FILE`` (alias ``open``): the Textual app on a problem file."""

from __future__ import annotations

import argparse
from pathlib import Path

from cudal1_tui.cli.options import add_settings_flags
from cudal1_tui.errors import Cudal1Error

NAME = "open"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(NAME, help="open the app on a problem file (also: cudal1-tui FILE)")
    parser.add_argument("file", type=Path, help="a KernelBench-style problem file")
    parser.add_argument("--resume", metavar="SESSION", help="continue a session (id or path)")
    add_settings_flags(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    raise Cudal1Error("the app is not built yet", fix="use `cudal1-tui run FILE --headless`")
