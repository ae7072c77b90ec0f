"""What a streamed chat request yields: one ``Completion`` per choice, with its usage."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

CHARS_PER_TOKEN = 4  # rough estimate when the server reports no usage


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


@dataclass
class Usage:
    """Token counts; ``estimated`` when derived from text length (or apportioned over choices)."""

    prompt_tokens: int
    completion_tokens: int
    estimated: bool = False

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "total_tokens": self.total_tokens}


@dataclass
class Completion:
    """One choice of a chat completion, streamed to its end (or to the point it stopped)."""

    index: int
    content: str
    reasoning: str
    finish_reason: str  # "stop", "length", … ; "" when the stream did not finish
    usage: Usage
    elapsed_s: float  # from sending the request to the last chunk
    tokens_per_s: float  # tokens after the first / time from the first token to the last
    model: str
    first_token_s: float | None = None  # time to the first reasoning or content text

    @property
    def truncated(self) -> bool:
        """The reply hit the length limit (``finish_reason == "length"``); not an error."""
        return self.finish_reason == "length"

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["usage"] = self.usage.to_dict()
        out["truncated"] = self.truncated
        return out
