"""Subcommands. Each module has NAME, ``add_parser(sub)`` and ``run(args) -> int``."""

from cudal1_tui.cli.commands import (
    config,
    doctor,
    eval_cmd,
    export,
    inspect_cmd,
    open_cmd,
    rescore,
    run_cmd,
    serve_replay,
    sessions,
    show,
)

ALL = (open_cmd, run_cmd, eval_cmd, inspect_cmd, sessions, show, export, rescore, doctor,
       config, serve_replay)
NAMES = tuple(module.NAME for module in ALL)
