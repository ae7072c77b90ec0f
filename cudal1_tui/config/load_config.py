"""Read settings from defaults, the TOML config file, the environment and flags."""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

import platformdirs

from cudal1_tui.config.settings import EffectiveSettings, Origin, Settings, setting_names
from cudal1_tui.config.validate import problem_with, validate
from cudal1_tui.errors import ConfigError

APP_NAME = "cudal1-tui"
CONFIG_ENV = "CUDAL1_CONFIG"

# Well-known variables first; every other setting is CUDAL1_<NAME>.
ENV_ALIASES: dict[str, tuple[str, ...]] = {
    "base_url": ("CUDAL1_BASE_URL", "OPENAI_BASE_URL"),
    "api_key": ("CUDAL1_API_KEY", "OPENAI_API_KEY"),
}


def default_config_path() -> Path:
    override = os.environ.get(CONFIG_ENV)
    if override:
        return Path(override).expanduser()
    return Path(platformdirs.user_config_dir(APP_NAME)) / "config.toml"


def default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir(APP_NAME))


def default_cache_dir() -> Path:
    return Path(platformdirs.user_cache_dir(APP_NAME))


def env_names(name: str) -> tuple[str, ...]:
    return ENV_ALIASES.get(name, (f"CUDAL1_{name.upper()}",))


def _line_of(text: str, key: str) -> int:
    """The line that sets ``key`` (``key = …``) or opens the table ``[key]``; 0 if none."""
    name = re.escape(key)
    pattern = re.compile(rf"^[ \t]*({name}[ \t]*=|\[[ \t]*{name}[ \t]*\])", re.MULTILINE)
    match = pattern.search(text)
    return text.count("\n", 0, match.start()) + 1 if match else 0


def _coerce(name: str, value: Any, default: Any) -> Any:
    """Convert ``value`` to the type of ``default``; raise ValueError with a reason."""
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in {"1", "true", "yes", "on"}:
            return True
        if isinstance(value, str) and value.lower() in {"0", "false", "no", "off"}:
            return False
        raise ValueError(f"{name} must be true or false, got {value!r}")
    if isinstance(default, int):
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise ValueError(f"{name} must be an integer, got {value!r}")
        try:
            return int(value)
        except ValueError:
            raise ValueError(f"{name} must be an integer, got {value!r}") from None
    if isinstance(default, float):
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise ValueError(f"{name} must be a number, got {value!r}")
        try:
            return float(value)
        except ValueError:
            raise ValueError(f"{name} must be a number, got {value!r}") from None
    if isinstance(default, dict):
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise ValueError(f"{name} must be a table of strings, got {value!r}")
        merged = dict(default)
        merged.update(value)
        return merged
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string, got {value!r}")
    return value


def parse_setting(name: str, raw: object) -> Any:
    """One value typed in (the settings form): the loader's parser, then its validator.

    Raises ValueError with a reason when the text is not a value of the setting's type or
    the value is refused."""
    value = _coerce(name, raw, getattr(Settings(), name))
    problem = problem_with(name, value)
    if problem:
        raise ValueError(problem)
    return value


def read_config_file(path: Path) -> dict[str, object]:
    """Parse the TOML file; errors name the file, the line and the problem."""
    text = path.read_text(encoding="utf-8")
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        where = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
        line = int(where.group(1)) if where else 0
        problem = re.sub(r"\s*\(at line.*\)$", "", str(exc))
        at = f":{line}:{where.group(2)}" if where else ""
        raise ConfigError(f"{path}{at}: error: {problem}", path=path, line=line) from None
    known = set(setting_names())
    defaults = Settings()
    values: dict[str, object] = {}
    for key, value in raw.items():
        if key not in known:
            line = _line_of(text, key)
            hint = ", ".join(sorted(known))
            raise ConfigError(f"{path}:{line}: error: unknown setting {key!r} (known: {hint})",
                              path=path, line=line)
        try:
            values[key] = _coerce(key, value, getattr(defaults, key))
        except ValueError as exc:
            line = _line_of(text, key)
            raise ConfigError(f"{path}:{line}: error: {exc}", path=path, line=line) from None
    return values


def load_settings(
    flags: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    config_path: Path | None = None,
) -> EffectiveSettings:
    """Merge default < file < env < flags and remember each value's origin."""
    env = os.environ if env is None else env
    path = config_path or default_config_path()
    settings = Settings()
    origins = {name: Origin("default") for name in setting_names()}

    exists = path.is_file()
    if exists:
        for name, value in read_config_file(path).items():
            setattr(settings, name, value)
            origins[name] = Origin("file", str(path))

    for f in fields(Settings):
        for var in env_names(f.name):
            raw = env.get(var)
            if raw is None or raw == "":
                continue
            try:
                setattr(settings, f.name, _coerce(f.name, raw, getattr(Settings(), f.name)))
            except ValueError as exc:
                raise ConfigError(f"environment variable {var}: error: {exc}",
                                  env_var=var) from None
            origins[f.name] = Origin("env", var)
            break

    for name, value in (flags or {}).items():
        if value is None:
            continue
        if name not in origins:
            raise ConfigError(f"unknown setting {name!r}")
        try:
            setattr(settings, name, _coerce(name, value, getattr(Settings(), name)))
        except ValueError as exc:
            raise ConfigError(f"command-line flag: error: {exc}") from None
        origins[name] = Origin("flag")

    validate(settings, origins, _file_line)
    return EffectiveSettings(settings, origins, path, exists)


def _file_line(path: Path, key: str) -> int:
    try:
        return _line_of(path.read_text(encoding="utf-8"), key)
    except OSError:
        return 0


def sessions_dir(settings: Settings) -> Path:
    return Path(settings.sessions_dir).expanduser() if settings.sessions_dir else (
        default_data_dir() / "sessions"
    )


def build_dir(settings: Settings) -> Path:
    return Path(settings.build_dir).expanduser() if settings.build_dir else (
        default_cache_dir() / "builds"
    )


def prompts_override_dir() -> Path:
    """User overrides for prompt templates live beside the config file."""
    return default_config_path().parent / "prompts"
