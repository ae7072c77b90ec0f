"""The model client's errors: each names its cause (``kind``) and carries the fix for it."""

from __future__ import annotations

from typing import Literal

from cudal1_tui.errors import ModelError
from cudal1_tui.llm.completion import Completion

ServerErrorKind = Literal["unreachable", "not_openai", "auth", "rate_limited", "timeout",
                          "model", "server", "request", "bad_chunk", "no_models", "cut"]


class ServerError(ModelError):
    """The model server failed in a way we can name (``kind``); ``status`` is its HTTP code."""

    def __init__(self, message: str, *, fix: str, kind: ServerErrorKind,
                 status: int | None = None) -> None:
        super().__init__(message, fix=fix)
        self.kind: ServerErrorKind = kind
        self.status = status


class StreamCut(ServerError):
    """The stream stopped before its end ([DONE] or a finish_reason); the partial text is kept.

    ``reason`` says why it stopped (a bad chunk, no data for N s, the connection dropped).
    """

    def __init__(self, reason: str, *, base_url: str, partial: list[Completion],
                 chars: int) -> None:
        super().__init__(f"the model stream from {base_url} was cut after {chars} chars: "
                         f"{reason}",
                         fix="retry the round; if it keeps happening, check the model "
                             "server's log (out of memory? restarted?)", kind="cut")
        self.reason = reason
        self.partial = partial
        self.chars = chars

    @property
    def partial_text(self) -> str:
        return "\n".join(c.content for c in self.partial if c.content)


class ModelCancelled(ModelError):
    """``stream_chat`` was cancelled through its ``cancel`` event; partial replies kept."""

    def __init__(self, partial: list[Completion]) -> None:
        super().__init__("the model request was cancelled")
        self.partial = partial
