"""Check setting values once, at load, against the evaluator's own vocabulary.

A bad value is reported where it came from: ``file:line: error: …`` for the config file,
the variable's name for the environment, "command-line flag" for flags. The tolerance
presets, devices and reward names are the evaluator's (``cudal1_evaluator.schema`` and
``cudal1_evaluator.reward``): nothing else in the app spells them out.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from cudal1_evaluator.schema import DEVICE_FORMS, REWARDS, TOLERANCES, parse_device
from cudal1_tui.config.keymap import key_problem
from cudal1_tui.config.settings import Origin, Settings
from cudal1_tui.errors import ConfigError
from cudal1_tui.gpushare.server_gpus import parse_setting as parse_model_gpus

WAIT_CHOICES = ("auto", "always", "never")

DEVICE_CHOICES = f"auto, {', '.join(DEVICE_FORMS)}"


def is_device(value: str, *, allow_auto: bool = True) -> bool:
    """``cpu``, ``cuda``, ``cuda:N`` (the evaluator's ``parse_device``), and ``auto`` unless
    the caller runs on a fixed device."""
    if allow_auto and value == "auto":
        return True
    try:
        return parse_device(value) == value
    except ValueError:
        return False


def _choice(name: str, allowed: tuple[str, ...]) -> Callable[[object], str]:
    def check(value: object) -> str:
        if value in allowed:
            return ""
        return f"{name} must be one of {', '.join(allowed)}, got {value!r}"

    return check


def _device(value: object) -> str:
    if isinstance(value, str) and is_device(value):
        return ""
    return f"device must be {DEVICE_CHOICES}, got {value!r}"


def _model_gpus(value: object) -> str:
    try:
        parse_model_gpus(str(value))
    except ValueError as exc:
        return str(exc)
    return ""


def _non_negative(name: str) -> Callable[[object], str]:
    def check(value: object) -> str:
        ok = isinstance(value, int | float) and value >= 0
        return "" if ok else f"{name} must be 0 or more, got {value!r}"

    return check


def _positive(name: str) -> Callable[[object], str]:
    def check(value: object) -> str:
        ok = isinstance(value, int | float) and value > 0
        return "" if ok else f"{name} must be greater than 0, got {value!r}"

    return check


def checks() -> dict[str, Callable[[object], str]]:
    return {
        "tolerance": _choice("tolerance", TOLERANCES),
        "reward": _choice("reward", REWARDS),
        "device": _device,
        "correctness_trials": _positive("correctness_trials"),
        "timing_budget_s": _positive("timing_budget_s"),
        "eval_timeout_s": _positive("eval_timeout_s"),
        "max_tokens": _positive("max_tokens"),
        "model_gpus": _model_gpus,
        "wait_for_model": _choice("wait_for_model", WAIT_CHOICES),
        "gpu_memory_margin_mb": _non_negative("gpu_memory_margin_mb"),
    }


def problem_with(name: str, value: object) -> str:
    """What is wrong with ``value`` for setting ``name``; "" when it is fine."""
    check = checks().get(name)
    return check(value) if check is not None else ""


def _where(origin: Origin, line: int) -> str:
    if origin.source == "file":
        return f"{origin.where}:{line}" if line else origin.where
    if origin.source == "env":
        return f"environment variable {origin.where}"
    return "command-line flag"


def _fail(origin: Origin, keys: tuple[str, ...], problem: str,
          line_of: Callable[[Path, str], int]) -> None:
    """Raise for the first of ``keys`` (a name, then the table it sits in) found in the file."""
    lines = (line_of(Path(origin.where), key) for key in keys) if origin.source == "file" else ()
    line = next((n for n in lines if n), 0)
    path = Path(origin.where) if origin.source == "file" else None
    env_var = origin.where if origin.source == "env" else ""
    raise ConfigError(f"{_where(origin, line)}: error: {problem}", path=path, line=line,
                      env_var=env_var)


def validate(settings: Settings, origins: dict[str, Origin],
             line_of: Callable[[Path, str], int]) -> None:
    """Raise ConfigError naming the first bad value and where it was set."""
    for name, check in checks().items():
        problem = check(getattr(settings, name))
        if problem:
            _fail(origins[name], (name,), problem, line_of)
    bad = key_problem(settings.keys)
    if bad is not None:
        binding_id, problem = bad
        _fail(origins["keys"], (binding_id, "keys"), problem, line_of)
