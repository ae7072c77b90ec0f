"""``cudal1-tui serve-replay TRACE_OR_DIR``: a local OpenAI-compatible replay server."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console

from cudal1_tui.errors import Cudal1Error
from cudal1_tui.replay import REASONING_STYLES, ReplayConfig, ReplayServer

NAME = "serve-replay"


def _numbers(text: str) -> tuple[int, ...]:
    """``"2,5"`` → ``(2, 5)``: request numbers (1-based) for a deterministic fault."""
    try:
        values = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        message = f"expected request numbers like 2,5, got {text!r}"
        raise argparse.ArgumentTypeError(message) from None
    if any(v < 1 for v in values):
        raise argparse.ArgumentTypeError("request numbers start at 1")
    return values


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(NAME, help="serve recorded replies over the OpenAI API (SSE)",
                            description="Serve recorded or scripted replies as an OpenAI-"
                            "compatible model server (formats: docs/replay.md).")
    parser.add_argument("source", type=Path, help="trace.jsonl, a session dir or a script")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    parser.add_argument("--model", default="",
                        help="model name to advertise (default: the trace's, else cudal1-replay)")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds between chunks")
    parser.add_argument("--fail-rate", type=float, default=0.0,
                        help="share of requests answered with HTTP 500")
    parser.add_argument("--cut-rate", type=float, default=0.0,
                        help="share of streams cut mid-way")
    parser.add_argument("--reasoning-style", choices=REASONING_STYLES, default="reasoning",
                        help="where reasoning goes: reasoning (vLLM, Ollama), reasoning_content "
                             "(SGLang, llama.cpp), think (inline <think> tags) or none")
    parser.add_argument("--chunk-chars", type=int, default=24, help="characters per delta")
    parser.add_argument("--fail-requests", type=_numbers, default=(), metavar="N,M",
                        help="answer these chat requests (numbered from 1) with HTTP 500")
    parser.add_argument("--cut-requests", type=_numbers, default=(), metavar="N,M",
                        help="cut these streams mid-way")
    parser.add_argument("--hang-rate", type=float, default=0.0,
                        help="share of streams that go silent mid-way for --hang-s")
    parser.add_argument("--hang-s", type=float, default=30.0, help="length of a hang")
    parser.add_argument("--length-rate", type=float, default=0.0,
                        help="share of replies truncated with finish_reason 'length'")
    parser.add_argument("--reject-n", action="store_true",
                        help="refuse n > 1 with HTTP 400, as llama.cpp does")
    parser.add_argument("--ignore-n", action="store_true",
                        help="answer one choice whatever n says, as Ollama does")
    parser.add_argument("--seed", type=int, default=0, help="seed of the fault draws")
    parser.add_argument("--quiet", action="store_true", help="do not log each request")
    parser.set_defaults(handler=run)


def config_from_args(args: argparse.Namespace) -> ReplayConfig:
    return ReplayConfig(
        source=args.source, model=args.model, host=args.host, port=args.port,
        reasoning_style=args.reasoning_style, chunk_chars=args.chunk_chars,
        latency_s=args.latency, seed=args.seed, fail_rate=args.fail_rate,
        fail_requests=args.fail_requests, cut_rate=args.cut_rate,
        cut_requests=args.cut_requests, hang_rate=args.hang_rate, hang_s=args.hang_s,
        length_rate=args.length_rate, reject_n=args.reject_n,
        ignore_n=args.ignore_n)


def run(args: argparse.Namespace) -> int:
    console = Console(stderr=True, highlight=False, soft_wrap=True)
    config = config_from_args(args)
    try:
        server = ReplayServer(config, log=None if args.quiet else console.print)
    except ValueError as exc:
        raise Cudal1Error(f"bad replay settings: {exc}", fix="see --help") from None
    try:
        url = server.bind()
    except OSError as exc:
        raise Cudal1Error(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}",
                          fix="pick another --port (0 picks a free one) or stop the other "
                              "server") from None
    replies = len(server.app.book.replies)
    console.print(f"replaying {replies} replies from {args.source} as model {server.model!r}")
    print(f"serving at {url}  (Ctrl-C to stop)", flush=True)
    console.print("point cudal1-tui at it:\n"
                  f"  OPENAI_BASE_URL={url} cudal1-tui examples/diag_matmul.py\n"
                  f"  cudal1-tui run examples/diag_matmul.py --headless --base-url {url}")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        console.print("stopped.")
    sys.stdout.flush()
    return 0
