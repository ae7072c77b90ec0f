"""``cudal1-tui doctor``: what this machine and configuration can do, each line with its fix."""

from __future__ import annotations

import argparse
import json

from rich.console import Console
from rich.table import Table

from cudal1_tui.cli.options import add_settings_flags, settings_from_args
from cudal1_tui.doctor import Check, run_checks

NAME = "doctor"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(NAME, help="check GPUs, torch, compilers, model server, config")
    parser.add_argument("--json", action="store_true", help="print JSON")
    add_settings_flags(parser)
    parser.set_defaults(handler=run)


def _render(checks: list[Check]) -> Table:
    table = Table(title="cudal1-tui doctor")
    table.add_column("check")
    table.add_column("status")
    table.add_column("detail")
    table.add_column("fix")
    marks = {"ok": "[green]ok[/]", "missing": "[red]missing[/]", "warn": "[yellow]warn[/]"}
    for check in checks:
        table.add_row(check.name, marks[check.status], check.detail, check.fix)
    return table


def run(args: argparse.Namespace) -> int:
    effective = settings_from_args(args)
    checks = run_checks(effective)
    if args.json:
        print(json.dumps([c.__dict__ for c in checks], indent=2))
    else:
        Console().print(_render(checks))
    return 0
