"""``cudal1-tui sessions``: list past sessions."""

from __future__ import annotations

import argparse

from cudal1_tui.cli.options import add_settings_flags
from cudal1_tui.errors import Cudal1Error

NAME = "sessions"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(NAME, help="list past sessions")
    parser.add_argument("--json", action="store_true", help="print JSON")
    add_settings_flags(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    raise Cudal1Error("sessions are not built yet")
