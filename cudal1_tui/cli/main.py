"""The ``cudal1-tui`` command: one entry, subcommands, ``cudal1-tui FILE`` opens the TUI."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from rich.console import Console

from cudal1_evaluator.lane import not_dumpable
from cudal1_tui import __version__
from cudal1_tui.cli import commands
from cudal1_tui.cli.reporting import report
from cudal1_tui.errors import Cudal1Error

EPILOG = """\
examples:
  cudal1-tui examples/diag_matmul.py          open the app on a problem (the main job)
  cudal1-tui run examples/*.py --headless --rounds 3
                                              the same loop without a screen
  cudal1-tui eval examples/relu.py cand.py --device cpu --json
                                              evaluate one candidate, print the result
  cudal1-tui sessions                         list past sessions
  cudal1-tui show SESSION                     one session's candidates and best speedup
  cudal1-tui export SESSION --format trl -o data.jsonl
                                              training data (openai-chat, trl, verl, jsonl, module)
  cudal1-tui doctor                           check GPU, compilers, model server and config
  cudal1-tui config show                      effective settings and where each came from
  cudal1-tui serve-replay examples/sessions/demo
                                              a local OpenAI-compatible server replaying a trace

model server: set OPENAI_BASE_URL (default http://localhost:8000/v1, vLLM's);
with none reachable, the built-in proposer still optimizes.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cudal1-tui",
        description="Make PyTorch modules faster on NVIDIA GPUs with a CUDA-L1-style model: "
        "candidates are compiled, verified and timed honestly; every one is logged as an "
        "RL reward record.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"cudal1-tui {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in commands.ALL:
        module.add_parser(sub)
    return parser


def _route(argv: list[str], names: set[str]) -> list[str]:
    """``cudal1-tui FILE [opts]`` means ``cudal1-tui open FILE [opts]``."""
    if argv and not argv[0].startswith("-") and argv[0] not in names:
        return ["open", *argv]
    return argv


def main(argv: Sequence[str] | None = None) -> int:
    not_dumpable()  # its /proc (lane channels, memory, secrets) closed to the user's others
    parser = build_parser()
    names = set(commands.NAMES)
    args = parser.parse_args(_route(list(sys.argv[1:] if argv is None else argv), names))
    if not args.command:
        parser.print_help()
        return 2
    try:
        code: int = args.handler(args)
        return code
    except Cudal1Error as exc:
        report(exc)
        return 1
    except KeyboardInterrupt:
        Console(stderr=True).print("interrupted; the session is saved.")
        return 130
