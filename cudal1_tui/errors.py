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


class ConfigError(Cudal1Error):
    def __init__(self, message: str, *, path: Path | None = None, line: int = 0) -> None:
        super().__init__(message, fix="edit the file, or run `cudal1-tui config show`")
        self.path = path
        self.line = line


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
