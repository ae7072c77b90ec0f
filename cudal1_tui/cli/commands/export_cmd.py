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
from rich.markup import escape

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
    parser.add_argument("--module-sizes", choices=("measured", "full"), default="measured",
                        help="the module format's sizes: those the speedup was measured at "
                        "(default; a CPU session's # cpu-sizes) or the file's full sizes")
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
                          fix=f"cudal1-tui export {' '.join(refs)} --format {fmt} "
                          "-o train.parquet")
    with tempfile.TemporaryDirectory() as tmp:
        result = export_sessions(refs, fmt, options, Path(tmp), root)
        sys.stdout.write(result.path.read_text(encoding="utf-8"))
        sys.stdout.flush()
    return ExportResult(Path("<stdout>"), result.rows, result.sessions)


def run(args: argparse.Namespace) -> int:
    root = sessions_dir(settings_from_args(args).settings)
    refs = [resolve_ref(ref, root) for ref in args.sessions]
    options = ExportOptions(min_speedup=args.min_speedup, only_accepted=args.only_accepted,
                            with_reasoning=args.with_reasoning, rescored=args.rescored,
                            module_sizes=args.module_sizes)
    formats: list[str] = args.format
    output: Path | None = args.output
    if len(formats) > 1:
        if output is None or (output.exists() and not output.is_dir()):
            raise ExportError("several formats are written to a directory, one file each",
                              fix=f"cudal1-tui export {' '.join(refs)} --format "
                              f"{','.join(formats)} -o out/")
        output.mkdir(parents=True, exist_ok=True)
    err = Console(stderr=True, highlight=False)
    empty = 0
    for fmt in formats:
        result = (_to_stdout(refs, fmt, options, root) if output is None
                  else export_sessions(refs, fmt, options, output, root))
        if result.rows == 0:
            empty += 1
            _drop_empty(result.path)
            err.print(f"[yellow]nothing exported ({fmt}): {nothing_matched(options)}[/]")
            continue
        noun = "row" if result.rows == 1 else "rows"
        err.print(f"wrote {result.rows} {noun} from {result.sessions} session(s) "
                  f"to {escape(str(result.path))} ({fmt})")
    return 1 if empty else 0


def nothing_matched(options: ExportOptions) -> str:
    """Why an export has no row, in words a user can act on."""
    if options.only_accepted:
        return "no candidate was accepted (drop --only-accepted, or accept one in the app)"
    if options.min_speedup is not None:
        return f"no candidate reached --min-speedup {options.min_speedup:g}"
    return "the sessions hold no candidate this format keeps"


def _drop_empty(path: Path) -> None:
    """An export without rows leaves no file: a 0-byte ``data.jsonl`` looks like a success."""
    try:
        if path.is_file():
            path.unlink()
    except OSError:
        pass
