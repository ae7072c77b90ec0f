"""``cudal1-tui eval PROBLEM CANDIDATE``: evaluate one candidate, print the result."""

from __future__ import annotations

import argparse
from pathlib import Path

from cudal1_tui.errors import Cudal1Error

NAME = "eval"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(NAME, help="evaluate one candidate against a problem")
    parser.add_argument("problem", type=Path, help="the reference problem file")
    parser.add_argument("candidate", type=Path, help="a module defining ModelNew")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default cpu)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--tolerance", default="strict", choices=["strict", "relaxed"])
    parser.add_argument("--trials", type=int, default=5, help="correctness trials")
    parser.add_argument("--budget", type=float, default=10.0, help="timing budget, seconds")
    parser.add_argument("--timeout", type=float, default=300.0, help="wall-clock limit, seconds")
    parser.add_argument("--torch-compile", action="store_true",
                        help="also time torch.compile of the reference")
    parser.add_argument("--build-dir", type=Path, default=None, help="build cache directory")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    raise Cudal1Error("the evaluator is not built yet")
