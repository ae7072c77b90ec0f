"""``cudal1-tui export SESSION... --format F``: training data and accepted kernels."""

from __future__ import annotations

import argparse
from pathlib import Path

from cudal1_tui.cli.options import add_settings_flags
from cudal1_tui.errors import Cudal1Error

NAME = "export"
FORMATS = ("openai-chat", "trl", "trl-preference", "verl", "jsonl", "module")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(NAME, help="export sessions as training data or a module")
    parser.add_argument("sessions", nargs="+", metavar="SESSION")
    parser.add_argument("--format", required=True, choices=FORMATS)
    parser.add_argument("--min-speedup", type=float, default=None,
                        help="keep candidates at least this fast")
    parser.add_argument("--only-accepted", action="store_true", help="accepted candidates only")
    parser.add_argument("-o", "--output", type=Path, default=None, help="output path")
    add_settings_flags(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    raise Cudal1Error("export is not built yet")
