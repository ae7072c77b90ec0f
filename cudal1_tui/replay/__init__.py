"""A local OpenAI-compatible server replaying recorded or scripted replies (``serve-replay``).

Formats of the sources: ``cudal1_tui.replay.source``; faults: ``cudal1_tui.replay.config``.
"""

from cudal1_tui.replay.config import (
    DEFAULT_MODEL,
    REASONING_STYLES,
    Faults,
    ReasoningStyle,
    ReplayConfig,
    faults_for,
)
from cudal1_tui.replay.server import ReplayServer, RequestLog
from cudal1_tui.replay.source import ReplaySourceError, Reply, ReplyBook, load_replies

__all__ = [
    "DEFAULT_MODEL",
    "REASONING_STYLES",
    "Faults",
    "ReasoningStyle",
    "ReplayConfig",
    "ReplayServer",
    "ReplaySourceError",
    "Reply",
    "ReplyBook",
    "RequestLog",
    "faults_for",
    "load_replies",
]
