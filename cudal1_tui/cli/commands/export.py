"""``cudal1-tui export SESSION... --format F``: training data and accepted kernels."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from cudal1_tui.cli.options import add_settings_flags, settings_from_args
from cudal1_tui.config import sessions_dir
from cudal1_tui.store.export import ExportOptions, export_sessions

NAME = "export"
FORMATS = ("openai-chat", "trl", "trl-preference", "verl", "jsonl", "module")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(NAME, help="export sessions as training data or a module")
    parser.add_argument("sessions", nargs="+", metavar="SESSION")
    parser.add_argument("--format", required=True, choices=FORMATS)
    parser.add_argument("--min-speedup", type=float, default=None,
                        help="keep candidates at least this fast (openai-chat default: 1.01)")
    parser.add_argument("--only-accepted", action="store_true", help="accepted candidates only")
    parser.add_argument("--with-reasoning", action="store_true",
                        help="prefix completions with the model's reasoning as <think>…</think>")
    parser.add_argument("--rescored", metavar="FORMULA", default="",
                        help="use rewards from `cudal1-tui rescore --formula FORMULA`")
    parser.add_argument("-o", "--output", type=Path, default=None, help="output path")
    add_settings_flags(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    root = sessions_dir(settings_from_args(args).settings)
    options = ExportOptions(min_speedup=args.min_speedup, only_accepted=args.only_accepted,
                            with_reasoning=args.with_reasoning, rescored=args.rescored)
    result = export_sessions(args.sessions, args.format, options, args.output, root)
    noun = "row" if result.rows == 1 else "rows"
    Console().print(f"wrote {result.rows} {noun} from {result.sessions} session(s) "
                    f"to {result.path} ({args.format})", highlight=False)
    if result.rows == 0:
        Console(stderr=True).print("[yellow]nothing matched the filters[/]")
    return 0
