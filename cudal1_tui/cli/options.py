"""Flags shared by subcommands that load settings, and turning them into Settings."""

from __future__ import annotations

import argparse
from pathlib import Path

from cudal1_evaluator.schema import TOLERANCES
from cudal1_tui.config import EffectiveSettings, load_settings
from cudal1_tui.config.validate import DEVICE_CHOICES

# flag -> setting name; the flag's value overrides env, file and default.
SETTING_FLAGS: dict[str, tuple[str, type, str]] = {
    "--base-url": ("base_url", str, "model server URL (OpenAI-compatible, ends in /v1)"),
    "--model": ("model", str, "model name (default: the first the server lists)"),
    "--device": ("device", str, f"where candidates run: {DEVICE_CHOICES}"),
    "--temperature": ("temperature", float, "sampling temperature"),
    "--candidates": ("candidates_per_round", int, "candidates per round"),
    "--tolerance": ("tolerance", str, f"correctness preset: {' or '.join(TOLERANCES)}"),
    "--sessions-dir": ("sessions_dir", str, "where sessions are stored"),
    "--seed": ("seed", int, "seed for exemplar sampling and the built-in proposer"),
}


def add_settings_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("settings (override env and config file)")
    for flag, (dest, kind, help_text) in SETTING_FLAGS.items():
        group.add_argument(flag, dest=f"set_{dest}", type=kind, default=None, help=help_text)
    group.add_argument("--no-builtin", dest="set_use_builtin", action="store_const",
                       const=False, default=None, help="do not run the built-in proposer")
    group.add_argument("--config", dest="config_path", type=Path, default=None,
                       help="config file to read instead of the default one")


def settings_from_args(args: argparse.Namespace) -> EffectiveSettings:
    flags = {
        key.removeprefix("set_"): value
        for key, value in vars(args).items()
        if key.startswith("set_") and value is not None
    }
    return load_settings(flags=flags, config_path=getattr(args, "config_path", None))
