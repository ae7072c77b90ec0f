"""``cudal1-tui rescore SESSION --formula F``: recompute rewards from raw timings."""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.table import Table

from cudal1_tui.cli.options import add_settings_flags, settings_from_args
from cudal1_tui.config import sessions_dir
from cudal1_tui.present.speedup import DASH, speed_text
from cudal1_tui.store import Session
from cudal1_tui.store.rescoring import (
    RescoredRow,
    parse_params,
    rescore,
    rescored_path,
    write_rescored,
)

NAME = "rescore"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(NAME, help="recompute a session's rewards with another formula")
    parser.add_argument("session", help="session id, unique prefix or path")
    parser.add_argument("--formula", required=True, help="reward formula name")
    parser.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                        help="formula parameter (repeatable)")
    add_settings_flags(parser)
    parser.set_defaults(handler=run)


def _table(rows: list[RescoredRow], title: str) -> Table:
    table = Table(title=title)
    for column in ("record", "status", "speedup", "old reward", "new reward"):
        table.add_column(column, overflow="fold", no_wrap=column == "record")
    for row in rows:
        table.add_row(row.record_id, row.status, speed_text(row.speedup, DASH),
                      f"{row.old_reward:.4g}", f"{row.reward:.4g}")
    return table


def run(args: argparse.Namespace) -> int:
    root = sessions_dir(settings_from_args(args).settings)
    params = parse_params(args.param)
    with Session.open(args.session, root, readonly=True) as session:
        rows = rescore(session.records(), args.formula, params)
        path = rescored_path(session.path, args.formula)
        write_rescored(path, rows)
    shown = ", ".join(f"{k}={v:g}" for k, v in params.items()) or "default parameters"
    console = Console()
    console.print(_table(rows, f"{args.formula} ({shown})"))
    console.print(f"wrote {len(rows)} rows to {path} (the trace is unchanged); "
                  f"export with `--rescored {args.formula}` to use them")
    return 0
