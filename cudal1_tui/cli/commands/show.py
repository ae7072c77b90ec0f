"""``cudal1-tui show SESSION``: a session's candidates, verdicts and best speedup."""

from __future__ import annotations

import argparse

from cudal1_tui.cli.options import add_settings_flags
from cudal1_tui.errors import Cudal1Error

NAME = "show"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(NAME, help="show one session")
    parser.add_argument("session", help="session id, unique prefix or path")
    parser.add_argument("--json", action="store_true", help="print JSON")
    add_settings_flags(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    raise Cudal1Error("sessions are not built yet")
