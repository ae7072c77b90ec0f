"""``cudal1-tui doctor``: what this machine and configuration can do, each line with its fix."""

from __future__ import annotations

import argparse
import json

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from cudal1_tui.cli.options import add_settings_flags, settings_from_args
from cudal1_tui.doctor import Check, run_checks

NAME = "doctor"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(NAME, help="check GPUs, torch, compilers, model server, config")
    parser.add_argument("--json", action="store_true", help="print JSON")
    add_settings_flags(parser)
    parser.set_defaults(handler=run)


MARKS = {"ok": "[green]ok[/]", "missing": "[red]missing[/]", "warn": "[yellow]warn[/]"}
WIDE = 120  # below this a table would cut paths: one block per check instead


def _render(checks: list[Check]) -> Table:
    table = Table(title="cudal1-tui doctor")
    table.add_column("check", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("detail", overflow="fold")  # a path is folded, never cut
    table.add_column("fix", overflow="fold")
    for check in checks:
        table.add_row(check.name, MARKS[check.status], escape(check.detail), escape(check.fix))
    return table


def _print_blocks(console: Console, checks: list[Check]) -> None:
    """A narrow terminal: each check on its own lines, every path whole."""
    console.print("[bold]cudal1-tui doctor[/]")
    for check in checks:
        console.print(f"{MARKS[check.status]}  [bold]{escape(check.name)}[/]")
        if check.detail:
            console.print(f"    {escape(check.detail)}", soft_wrap=True)
        if check.fix:
            console.print(f"    fix: {escape(check.fix)}", soft_wrap=True)


def run(args: argparse.Namespace) -> int:
    effective = settings_from_args(args)
    checks = run_checks(effective)
    if args.json:
        print(json.dumps([c.__dict__ for c in checks], indent=2))
    else:
        console = Console(highlight=False)
        if console.width < WIDE:
            _print_blocks(console, checks)
        else:
            console.print(_render(checks))
    return 0
