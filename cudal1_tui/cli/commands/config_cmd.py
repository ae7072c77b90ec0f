"""``cudal1-tui config show|path``: the effective settings and where each came from."""

from __future__ import annotations

import argparse
import json

from rich.console import Console
from rich.table import Table

from cudal1_tui.cli.options import add_settings_flags, settings_from_args

NAME = "config"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(NAME, help="show the effective configuration")
    parser.add_argument("action", choices=["show", "path"], nargs="?", default="show")
    parser.add_argument("--json", action="store_true", help="print JSON")
    add_settings_flags(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    effective = settings_from_args(args)
    if args.action == "path":
        print(effective.config_path)
        return 0
    rows = effective.rows()
    if args.json:
        print(json.dumps({name: {"value": value, "source": origin.source, "where": origin.where}
                          for name, value, origin in rows}, indent=2))
        return 0
    status = "exists" if effective.config_exists else "not present, defaults apply"
    table = Table(title=f"config file: {effective.config_path} ({status})")
    table.add_column("setting")
    table.add_column("value")
    table.add_column("from")
    for name, value, origin in rows:
        where = f"{origin.source} ({origin.where})" if origin.where else origin.source
        table.add_row(name, str(value), where)
    Console().print(table)
    return 0
