"""Subcommands. Each module has NAME, ``add_parser(sub)`` and ``run(args) -> int``."""

from cudal1_tui.cli.commands import (
    config_cmd,
    doctor_cmd,
    eval_cmd,
    export_cmd,
    inspect_cmd,
    open_cmd,
    rescore_cmd,
    run_cmd,
    serve_replay,
    sessions_cmd,
    show,
)

ALL = (open_cmd, run_cmd, eval_cmd, inspect_cmd, sessions_cmd, show, export_cmd, rescore_cmd,
       doctor_cmd, config_cmd, serve_replay)
NAMES = tuple(module.NAME for module in ALL)
