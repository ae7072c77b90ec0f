"""A local OpenAI-compatible server replaying recorded or scripted replies (``serve-replay``).

Formats of the sources: ``cudal1_tui.replay.reply_source``;
faults: ``cudal1_tui.replay.replay_config``.
"""

from cudal1_tui.replay.replay_config import (
    DEFAULT_MODEL,
    REASONING_STYLES,
    BeforeReply,
    Faults,
    ReasoningStyle,
    ReplayConfig,
    faults_for,
)
from cudal1_tui.replay.reply_source import ReplaySourceError, Reply, ReplyBook, load_replies
from cudal1_tui.replay.server import ReplayServer, RequestLog

__all__ = [
    "DEFAULT_MODEL",
    "REASONING_STYLES",
    "BeforeReply",
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
