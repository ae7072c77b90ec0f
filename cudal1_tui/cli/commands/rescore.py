"""``cudal1-tui rescore SESSION --formula F``: recompute rewards from raw timings."""

from __future__ import annotations

import argparse

from cudal1_tui.cli.options import add_settings_flags
from cudal1_tui.errors import Cudal1Error

NAME = "rescore"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(NAME, help="recompute a session's rewards with another formula")
    parser.add_argument("session", help="session id, unique prefix or path")
    parser.add_argument("--formula", required=True, help="reward formula name")
    parser.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                        help="formula parameter (repeatable)")
    add_settings_flags(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    raise Cudal1Error("rescoring is not built yet")
