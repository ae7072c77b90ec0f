"""``cudal1-tui inspect FILE``: check a problem file's contract, then probe it."""

from __future__ import annotations

import argparse
from pathlib import Path

from cudal1_tui.errors import Cudal1Error

NAME = "inspect"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(NAME, help="check a problem file and probe it in a subprocess")
    parser.add_argument("files", type=Path, nargs="+", metavar="FILE")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default cpu)")
    parser.add_argument("--no-probe", action="store_true", help="static checks only")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    raise Cudal1Error("problem inspection is not built yet")
