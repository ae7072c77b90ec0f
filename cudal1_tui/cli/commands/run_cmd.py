"""``cudal1-tui run DIR_OR_FILES... --headless --rounds N``: the loop without a screen, for
one problem or many, over every GPU of the host or a Ray cluster."""

from __future__ import annotations

import argparse
from pathlib import Path

from cudal1_tui.cli.options import add_settings_flags, settings_from_args
from cudal1_tui.errors import ConfigError

NAME = "run"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(NAME, help="run optimization rounds headless (rich progress, summary)")
    parser.add_argument("files", type=Path, nargs="+", metavar="DIR_OR_FILE",
                        help="problem files, or folders of them (their *.py files)")
    parser.add_argument("--headless", action="store_true",
                        help="no screen: progress and a summary table on the terminal")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per problem (default 3)")
    parser.add_argument("--resume", metavar="SESSION", help="continue a session (id or path)")
    parser.add_argument("--accept-best", action="store_true",
                        help="accept the best verified candidate of each round")
    parser.add_argument("--sizes", choices=("auto", "full", "cpu"), default="auto",
                        help="problem sizes: auto (CPU sizes on a CPU), full, or cpu "
                             "(the file's `# cpu-sizes:` values)")
    parser.add_argument("--gpus", metavar="LIST",
                        help="GPUs of this host to time on, e.g. 0,1 or 0-3 (default: all; "
                             "one timing lane per GPU)")
    parser.add_argument("--cluster", metavar="ADDRESS",
                        help="a Ray cluster (ray://HOST:10001, or HOST:6379 on a node; "
                             "default: RAY_ADDRESS if set); `local`: this host only")
    parser.add_argument("--parallel", type=int, default=0, metavar="N",
                        help="problems optimized at once (default: 2 per lane, at least 4)")
    parser.add_argument("--report-json", type=Path, metavar="PATH",
                        help="write the run's throughput and every verdict as JSON")
    add_settings_flags(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    # The engine (and what it pulls in) loads only when the command runs.
    from cudal1_tui.cli.headless_run import Options, run_headless
    from cudal1_tui.engine.fleet import parse_gpus

    if args.rounds < 1:
        raise ConfigError(f"--rounds must be at least 1, got {args.rounds}")
    if args.parallel < 0:
        raise ConfigError(f"--parallel must be 0 (automatic) or more, got {args.parallel}")
    settings = settings_from_args(args).settings
    options = Options(rounds=args.rounds, resume=args.resume, accept_best=args.accept_best,
                      sizes=args.sizes, gpus=parse_gpus(args.gpus) if args.gpus else None,
                      cluster=args.cluster, parallel=args.parallel,
                      report_json=args.report_json)
    code = run_headless(list(args.files), settings, options)
    if code >= 128:  # interrupted (Ctrl-C, SIGTERM, SIGHUP): saved and closed, so leave now
        from cudal1_tui.engine.shutdown import exit_now

        exit_now(code)
    return code
