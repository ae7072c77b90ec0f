"""Typed errors. Each carries a message for the user and, where known, the fix."""

from __future__ import annotations

from pathlib import Path


class Cudal1Error(Exception):
    """Base of every error the app reports to the user (never as a traceback)."""

    def __init__(self, message: str, *, fix: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix

    def __str__(self) -> str:
        return f"{self.message}\n  fix: {self.fix}" if self.fix else self.message


CHECK_CONFIG = "cudal1-tui config show"


def config_fix(path: Path | None, line: int, env_var: str) -> str:
    """A command that fixes the bad value where it was set: the file opened at its line, the
    environment variable unset (the default applies); else the check that names it."""
    if env_var:
        return f"unset {env_var}   # or set it to a valid value; then: {CHECK_CONFIG}"
    if path is not None:
        at = f"+{line} " if line else ""
        return f"${{EDITOR:-vi}} {at}{path}   # then: {CHECK_CONFIG}"
    return CHECK_CONFIG


class ConfigError(Cudal1Error):
    """A bad setting. ``path``/``line``: in the config file; ``env_var``: in the environment."""

    def __init__(self, message: str, *, path: Path | None = None, line: int = 0,
                 env_var: str = "", fix: str = "") -> None:
        super().__init__(message, fix=fix or config_fix(path, line, env_var))
        self.path = path
        self.line = line
        self.env_var = env_var


def compiler_style(message: str) -> bool:
    """Whether ``message`` already says where and that it is an error (``file:3: error: …``):
    printing ``error:`` before it again would say it twice."""
    return ": error: " in message.split("\n", 1)[0]


class ProblemError(Cudal1Error):
    """The problem file does not meet the contract or cannot run."""


class ModelError(Cudal1Error):
    """The model endpoint failed: server down, unknown model, HTTP error, cut stream."""


class ReplyError(Cudal1Error):
    """The model's reply holds no usable candidate."""


class SessionError(Cudal1Error):
    """A session directory is missing, locked or damaged."""


class ExportError(Cudal1Error):
    """An export could not be written."""


class FleetError(Cudal1Error):
    """Where evaluations should run cannot be used: a GPU that is not there, a cluster that
    cannot be reached or Ray not installed."""
