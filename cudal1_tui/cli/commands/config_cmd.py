"""``cudal1-tui config show|path``: the effective settings and where each came from."""

from __future__ import annotations

import argparse
import json
import os

from rich.console import Console
from rich.table import Table

from cudal1_tui.cli.options import add_settings_flags, settings_from_args
from cudal1_tui.cli.reporting import report
from cudal1_tui.config import EffectiveSettings, load_settings
from cudal1_tui.config.load_config import default_config_path
from cudal1_tui.errors import ConfigError

NAME = "config"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(NAME, help="show the effective configuration")
    parser.add_argument("action", choices=["show", "path"], nargs="?", default="show")
    parser.add_argument("--json", action="store_true", help="print JSON")
    add_settings_flags(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.action == "path":  # where the file is, even when it does not parse
        print(getattr(args, "config_path", None) or default_config_path())
        return 0
    try:
        effective, ignored = settings_from_args(args), ""
    except ConfigError as exc:  # say what is wrong, then what applies without it
        report(exc)
        effective, ignored = without_bad_source(args, exc)
    show(effective, args.json, ignored)
    return 1 if ignored else 0


def without_bad_source(args: argparse.Namespace, exc: ConfigError) -> tuple[
        EffectiveSettings, str]:
    """The settings with the source that failed left out: the config file or the variable.
    A bad flag or value that cannot be left out raises the error again."""
    flags = {k.removeprefix("set_"): v for k, v in vars(args).items()
             if k.startswith("set_") and v is not None}
    if exc.env_var:
        env = {k: v for k, v in os.environ.items() if k != exc.env_var}
        return load_settings(flags=flags, env=env, config_path=args.config_path), exc.env_var
    if exc.path is not None:
        missing = exc.path.with_name(exc.path.name + ".ignored-by-config-show")
        effective = load_settings(flags=flags, config_path=missing)
        effective.config_path = exc.path
        return effective, str(exc.path)
    raise exc


def show(effective: EffectiveSettings, as_json: bool, ignored: str = "") -> None:
    rows = effective.rows()
    if as_json:
        print(json.dumps({name: {"value": value, "source": origin.source, "where": origin.where}
                          for name, value, origin in rows}, indent=2))
        return
    console = Console()
    if ignored:
        console.print(f"left out below: {ignored} (it holds the error above)",
                      markup=False, highlight=False)
        status = "left out" if ignored == str(effective.config_path) else "exists"
    else:
        status = "exists" if effective.config_exists else "not present, defaults apply"
    table = Table(title=f"config file: {effective.config_path} ({status})")
    table.add_column("setting")
    table.add_column("value")
    table.add_column("from")
    for name, value, origin in rows:
        where = f"{origin.source} ({origin.where})" if origin.where else origin.source
        table.add_row(name, str(value), where)
    console.print(table)
