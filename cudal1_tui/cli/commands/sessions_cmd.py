"""``cudal1-tui sessions``: list past sessions; ``sessions prune`` removes empty (and old) ones."""

from __future__ import annotations

import argparse
import json

from rich.console import Console
from rich.table import Table

from cudal1_tui.cli.options import add_settings_flags, settings_from_args
from cudal1_tui.config import sessions_dir
from cudal1_tui.present.speedup import DASH, speed_text
from cudal1_tui.store import SessionSummary, list_sessions

NAME = "sessions"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(NAME, help="list past sessions (or prune them)")
    parser.add_argument("action", nargs="?", choices=("list", "prune"), default="list",
                        help="list (default), or prune: remove empty sessions, and with "
                        "--older-than also old ones")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--older-than", type=float, metavar="DAYS", default=None,
                        help="prune: also remove sessions created more than DAYS ago")
    parser.add_argument("--dry-run", action="store_true",
                        help="prune: say what would be removed, remove nothing")
    add_settings_flags(parser)
    parser.set_defaults(handler=run)


NARROW = 110  # below this problem and model go: the others keep whole words


def _table(rows: list[SessionSummary], root: str, width: int = 200) -> Table:
    columns = ["id", "problem", "cands", "best", "accepted", "model"]
    if width < NARROW:  # the id names the problem already
        columns = [c for c in columns if c not in ("problem", "model")]
    table = Table(title=f"sessions in {root}", title_justify="left")
    for column in columns:
        table.add_column(column, justify="right" if column == "cands" else "left",
                         overflow="fold", no_wrap=column != "problem")
    for s in rows:
        cells = {"id": s.session_id, "problem": s.problem, "cands": str(s.candidates),
                 "best": speed_text(s.best_speedup, DASH),
                 "accepted": speed_text(s.accepted_speedup, DASH), "model": s.model or "-"}
        table.add_row(*(cells[c] for c in columns))
    return table


def _prune(args: argparse.Namespace, rows: list[SessionSummary]) -> int:
    from pathlib import Path

    from cudal1_tui.cli import prune

    console = Console(highlight=False)
    doomed = prune.choose(rows, args.older_than)
    verb = "would remove" if args.dry_run else "removed"
    removed = 0
    for item in doomed:
        if args.dry_run or prune.remove(Path(item.summary.folder)):
            removed += 1
            console.print(f"{verb} {item.summary.session_id} ({item.why})")
        else:
            console.print(f"kept {item.summary.session_id}: in use by a running app")
    console.print(f"{verb} {removed} session(s); {len(rows) - removed} kept")
    return 0


def run(args: argparse.Namespace) -> int:
    root = sessions_dir(settings_from_args(args).settings)
    rows = list_sessions(root)
    if args.action == "prune":
        return _prune(args, rows)
    if args.json:
        print(json.dumps([s.to_dict() for s in rows], indent=2))
    elif not rows:
        Console().print(f"no sessions in {root} yet; start one with `cudal1-tui FILE`")
    else:
        console = Console()
        console.print(_table(rows, str(root), console.width))
    return 0
