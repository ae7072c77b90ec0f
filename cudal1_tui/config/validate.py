"""Check setting values once, at load, against the evaluator's own vocabulary.

A bad value is reported where it came from: ``file:line: error: …`` for the config file,
the variable's name for the environment, "command-line flag" for flags.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from cudal1_evaluator.reward import FORMULAS
from cudal1_tui.config.settings import Origin, Settings
from cudal1_tui.errors import ConfigError

DEVICE = re.compile(r"^(auto|cpu|cuda|cuda:\d+)$")


def tolerance_presets() -> tuple[str, ...]:
    try:  # the schema is the contract's home; older layouts kept the names in launch
        from cudal1_evaluator.schema import TOLERANCES  # type: ignore[attr-defined]
    except ImportError:
        from cudal1_evaluator.launch import TOLERANCES
    return tuple(TOLERANCES)


def _choice(name: str, allowed: tuple[str, ...]) -> Callable[[object], str]:
    def check(value: object) -> str:
        if value in allowed:
            return ""
        return f"{name} must be one of {', '.join(allowed)}, got {value!r}"

    return check


def _device(value: object) -> str:
    if isinstance(value, str) and DEVICE.match(value):
        return ""
    return f"device must be auto, cpu, cuda or cuda:N, got {value!r}"


def _positive(name: str) -> Callable[[object], str]:
    def check(value: object) -> str:
        ok = isinstance(value, int | float) and value > 0
        return "" if ok else f"{name} must be greater than 0, got {value!r}"

    return check


def checks() -> dict[str, Callable[[object], str]]:
    return {
        "tolerance": _choice("tolerance", tolerance_presets()),
        "reward": _choice("reward", tuple(FORMULAS)),
        "device": _device,
        "correctness_trials": _positive("correctness_trials"),
        "timing_budget_s": _positive("timing_budget_s"),
        "eval_timeout_s": _positive("eval_timeout_s"),
        "max_tokens": _positive("max_tokens"),
    }


def _where(origin: Origin, name: str, line_of: Callable[[Path, str], int]) -> str:
    if origin.source == "file":
        line = line_of(Path(origin.where), name)
        return f"{origin.where}:{line}" if line else origin.where
    if origin.source == "env":
        return f"environment variable {origin.where}"
    return "command-line flag"


def validate(settings: Settings, origins: dict[str, Origin],
             line_of: Callable[[Path, str], int]) -> None:
    """Raise ConfigError naming the first bad value and where it was set."""
    for name, check in checks().items():
        problem = check(getattr(settings, name))
        if not problem:
            continue
        origin = origins[name]
        where = _where(origin, name, line_of)
        line = line_of(Path(origin.where), name) if origin.source == "file" else 0
        path = Path(origin.where) if origin.source == "file" else None
        raise ConfigError(f"{where}: error: {problem}", path=path, line=line)
