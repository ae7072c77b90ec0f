"""``cudal1-tui export SESSION... --format F``: training data and accepted kernels.

Without ``-o`` the export goes to stdout (the summary line to stderr); ``-o FILE`` writes a
file; several formats (``--format trl,openai-chat``) need ``-o DIR`` and write one file each.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from rich.console import Console

from cudal1_tui.cli.options import add_settings_flags, settings_from_args
from cudal1_tui.cli.session_refs import resolve_ref
from cudal1_tui.config import sessions_dir
from cudal1_tui.errors import ExportError
from cudal1_tui.store.export import ExportOptions, ExportResult, export_sessions

NAME = "export"
FORMATS = ("openai-chat", "trl", "trl-preference", "verl", "jsonl", "module")
BINARY = frozenset({"verl"})  # parquet: a file, never a terminal


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(NAME, help="export sessions as training data or a module")
    parser.add_argument("sessions", nargs="+", metavar="SESSION",
                        help="session id, unique prefix, path, or @last")
    parser.add_argument("--format", required=True, type=_formats,
                        help=f"one or several, comma-separated: {', '.join(FORMATS)}")
    parser.add_argument("--min-speedup", type=float, default=None,
                        help="keep candidates at least this fast (openai-chat default: 1.01)")
    parser.add_argument("--only-accepted", action="store_true", help="accepted candidates only")
    parser.add_argument("--with-reasoning", action="store_true",
                        help="prefix completions with the model's reasoning as <think>…</think>")
    parser.add_argument("--rescored", metavar="FORMULA", default="",
                        help="use rewards from `cudal1-tui rescore --formula FORMULA`")
    parser.add_argument("-o", "--output", type=Path, default=None,
                        help="output file (a directory for several formats); default: stdout")
    add_settings_flags(parser)
    parser.set_defaults(handler=run)


def _formats(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in FORMATS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown format {', '.join(unknown) or repr(text)}; use {', '.join(FORMATS)}")
    return list(dict.fromkeys(names))


def _to_stdout(refs: list[str], fmt: str, options: ExportOptions, root: Path) -> ExportResult:
    if fmt in BINARY:
        raise ExportError(f"the {fmt} format is binary (parquet) and cannot go to stdout",
                          fix="pass -o FILE.parquet")
    with tempfile.TemporaryDirectory() as tmp:
        result = export_sessions(refs, fmt, options, Path(tmp), root)
        sys.stdout.write(result.path.read_text(encoding="utf-8"))
        sys.stdout.flush()
    return ExportResult(Path("<stdout>"), result.rows, result.sessions)


def run(args: argparse.Namespace) -> int:
    root = sessions_dir(settings_from_args(args).settings)
    refs = [resolve_ref(ref, root) for ref in args.sessions]
    options = ExportOptions(min_speedup=args.min_speedup, only_accepted=args.only_accepted,
                            with_reasoning=args.with_reasoning, rescored=args.rescored)
    formats: list[str] = args.format
    output: Path | None = args.output
    if len(formats) > 1:
        if output is None or (output.exists() and not output.is_dir()):
            raise ExportError("several formats are written to a directory, one file each",
                              fix="pass -o DIR")
        output.mkdir(parents=True, exist_ok=True)
    err = Console(stderr=True, highlight=False)
    for fmt in formats:
        result = (_to_stdout(refs, fmt, options, root) if output is None
                  else export_sessions(refs, fmt, options, output, root))
        noun = "row" if result.rows == 1 else "rows"
        err.print(f"wrote {result.rows} {noun} from {result.sessions} session(s) "
                  f"to {result.path} ({fmt})")
        if result.rows == 0:
            err.print("[yellow]nothing matched the filters[/]")
    return 0
