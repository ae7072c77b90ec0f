"""Configuration: defaults < config file < environment < flags."""

from cudal1_tui.config.keymap import DEFAULT_KEYS
from cudal1_tui.config.load_config import (
    build_dir,
    default_config_path,
    load_settings,
    prompts_override_dir,
    sessions_dir,
)
from cudal1_tui.config.settings import EffectiveSettings, Origin, Settings

__all__ = [
    "DEFAULT_KEYS",
    "EffectiveSettings",
    "Origin",
    "Settings",
    "build_dir",
    "default_config_path",
    "load_settings",
    "prompts_override_dir",
    "sessions_dir",
]
