"""Reading a streamed reply: reasoning fields, inline ``<think>`` tags, per-choice state."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from cudal1_tui.llm.completion import Completion, Usage, estimate_tokens

OPEN_TAG, CLOSE_TAG = "<think>", "</think>"
REASONING_FIELDS = ("reasoning", "reasoning_content")
Part = tuple[str, str]  # (kind: "reasoning" | "content", text)


def _partial_tag_len(text: str, tag: str) -> int:
    """Length of the longest suffix of ``text`` that is a proper prefix of ``tag``."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:size]):
            return size
    return 0


class ThinkSplitter:
    """Splits ``<think>…</think>`` out of content fed piece by piece (tags may span pieces)."""

    def __init__(self) -> None:
        self.inside = False
        self.seen_open = False
        self._pending = ""

    def feed(self, text: str) -> list[Part]:
        buffer, self._pending = self._pending + text, ""
        out: list[Part] = []
        while buffer:
            tag = CLOSE_TAG if self.inside else OPEN_TAG
            kind = "reasoning" if self.inside else "content"
            at = buffer.find(tag)
            if at < 0:
                keep = _partial_tag_len(buffer, tag)
                if len(buffer) > keep:
                    out.append((kind, buffer[:len(buffer) - keep]))
                self._pending = buffer[len(buffer) - keep:]
                break
            if at:
                out.append((kind, buffer[:at]))
            buffer = buffer[at + len(tag):]
            self.seen_open = self.seen_open or not self.inside
            self.inside = not self.inside
        return out

    def flush(self) -> list[Part]:
        """Whatever a partial tag held back, as plain text of the current kind."""
        text, self._pending = self._pending, ""
        return [("reasoning" if self.inside else "content", text)] if text else []


def delta_parts(delta: Any) -> list[tuple[str, str]]:
    """(field, text) of a chunk's delta: the reasoning fields first, then ``content``."""
    extra: dict[str, Any] = getattr(delta, "model_extra", None) or {}
    out: list[tuple[str, str]] = []
    for name in REASONING_FIELDS:
        value = getattr(delta, name, None) or extra.get(name)
        if isinstance(value, str) and value:
            out.append(("reasoning", value))
    content = getattr(delta, "content", None)
    if isinstance(content, str) and content:
        out.append(("content", content))
    return out


@dataclass
class ChoiceState:
    """One choice being streamed."""

    index: int
    started: float
    reasoning: list[str] = field(default_factory=list)
    content: list[str] = field(default_factory=list)
    finish_reason: str = ""
    seen: bool = False  # a chunk for this choice arrived
    model: str = ""
    first_token_at: float | None = None
    last_at: float | None = None
    splitter: ThinkSplitter = field(default_factory=ThinkSplitter)

    @property
    def chars(self) -> int:
        return sum(map(len, self.reasoning)) + sum(map(len, self.content))

    def add(self, kind: str, text: str) -> list[Part]:
        """Record a delta field's text; the parts it yields once ``<think>`` is split out."""
        now = time.monotonic()
        self.last_at = now
        parts = [(kind, text)] if kind == "reasoning" else self.splitter.feed(text)
        for part_kind, part in parts:
            (self.reasoning if part_kind == "reasoning" else self.content).append(part)
            if self.first_token_at is None:
                self.first_token_at = now
        return parts

    def finish(self, reason: str) -> list[Part]:
        self.finish_reason = reason
        parts = self.splitter.flush()
        for kind, text in parts:
            (self.reasoning if kind == "reasoning" else self.content).append(text)
        return parts

    def texts(self) -> tuple[str, str]:
        """(reasoning, content); a ``</think>`` with no opening tag ends the reasoning."""
        reasoning, content = "".join(self.reasoning), "".join(self.content)
        if not self.splitter.seen_open and CLOSE_TAG in content:
            before, content = content.split(CLOSE_TAG, 1)
            reasoning += before
        if self.splitter.seen_open or reasoning:
            content = content.lstrip("\n")
        return reasoning.strip("\n"), content

    def completion(self, usage: Usage, default_model: str) -> Completion:
        reasoning, content = self.texts()
        end = self.last_at or time.monotonic()
        elapsed = max(end - self.started, 1e-6)
        first = self.first_token_at - self.started if self.first_token_at is not None else None
        return Completion(index=self.index, content=content, reasoning=reasoning,
                          finish_reason=self.finish_reason, usage=usage, elapsed_s=elapsed,
                          tokens_per_s=self.decode_rate(usage.completion_tokens, end),
                          model=self.model or default_model, first_token_s=first)

    def decode_rate(self, tokens: int, end: float) -> float:
        """Tokens per second after the first one: the time queued and prefilling in the server
        (``first_token_s``) is not generation; 0.0 when there is nothing to measure."""
        if self.first_token_at is None or tokens < 2 or end <= self.first_token_at:
            return 0.0
        return (tokens - 1) / (end - self.first_token_at)


def apportion_usage(states: list[ChoiceState], prompt_tokens: int,
                    reported: Usage | None) -> list[Usage]:
    """Per-choice usage: the server's when one choice, else split by characters or estimated."""
    if reported is not None and len(states) == 1:
        return [reported]
    if reported is not None:
        total_chars = sum(s.chars for s in states) or 1
        return [Usage(reported.prompt_tokens,
                      round(reported.completion_tokens * s.chars / total_chars), estimated=True)
                for s in states]
    return [Usage(prompt_tokens, estimate_tokens("".join(s.reasoning) + "".join(s.content)),
                  estimated=True) for s in states]
