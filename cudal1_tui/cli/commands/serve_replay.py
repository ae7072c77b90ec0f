"""``cudal1-tui serve-replay TRACE_OR_DIR``: a local OpenAI-compatible replay server."""

from __future__ import annotations

import argparse
from pathlib import Path

from cudal1_tui.errors import Cudal1Error

NAME = "serve-replay"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(NAME, help="serve recorded replies over the OpenAI API (SSE)")
    parser.add_argument("source", type=Path, help="trace.jsonl, a session dir or a script")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--model", default="cudal1-replay", help="model name to advertise")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds between chunks")
    parser.add_argument("--fail-rate", type=float, default=0.0,
                        help="share of requests answered with HTTP 500")
    parser.add_argument("--cut-rate", type=float, default=0.0,
                        help="share of streams cut mid-way")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    raise Cudal1Error("the replay server is not built yet")
