"""The model side: an OpenAI-compatible streaming client (and, in ``parsing``, reply parsing)."""

from cudal1_tui.llm.client import ModelClient, normalize_base_url
from cudal1_tui.llm.client_errors import ModelCancelled, ServerError, StreamCut
from cudal1_tui.llm.completion import Completion, Usage, estimate_tokens
from cudal1_tui.llm.stream import ThinkSplitter

__all__ = [
    "Completion",
    "ModelCancelled",
    "ModelClient",
    "ServerError",
    "StreamCut",
    "ThinkSplitter",
    "Usage",
    "estimate_tokens",
    "normalize_base_url",
]
