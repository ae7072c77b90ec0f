"""OpenAI chat-completions wire shapes: request checks, chunks, completions, errors."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, NotRequired, TypedDict

from cudal1_tui.replay.replay_config import ReasoningStyle
from cudal1_tui.replay.reply_source import Reply

CHARS_PER_TOKEN = 4
MAX_N = 16


class ErrorFields(TypedDict):
    message: str
    type: str
    param: str | None
    code: int


class ErrorBody(TypedDict):
    error: ErrorFields
    object: Literal["error"]
    message: str


class Usage(TypedDict):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class Delta(TypedDict, total=False):
    """A streamed choice's increment; a reasoning server names its field one of two ways."""

    role: Literal["assistant"]
    content: str
    reasoning: str
    reasoning_content: str


class AssistantMessage(Delta):
    """A whole reply of a non-streamed completion: the same fields as a delta."""


class DeltaChoice(TypedDict):
    index: int
    delta: Delta
    logprobs: None
    finish_reason: str | None


class Chunk(TypedDict):
    id: str
    object: Literal["chat.completion.chunk"]
    created: int
    model: str
    choices: list[DeltaChoice]
    usage: NotRequired[Usage]


class MessageChoice(TypedDict):
    index: int
    message: AssistantMessage
    logprobs: None
    finish_reason: str


class ChatCompletion(TypedDict):
    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    choices: list[MessageChoice]
    usage: Usage


class RequestError(Exception):
    """A request the server refuses, with its HTTP status and OpenAI error fields."""

    def __init__(self, status: int, message: str, *, kind: str = "BadRequestError",
                 param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind
        self.param = param

    def body(self) -> ErrorBody:
        return error_body(self.message, self.kind, self.status, self.param)


def error_body(message: str, kind: str, code: int, param: str | None = None) -> ErrorBody:
    return {"error": {"message": message, "type": kind, "param": param, "code": code},
            "object": "error", "message": message}


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


@dataclass
class ChatRequest:
    model: str
    prompt_text: str
    stream: bool
    n: int
    max_tokens: int | None
    include_usage: bool
    has_stream_options: bool = False


def _int_field(data: Mapping[str, object], name: str, low: int, high: int | None) -> int | None:
    value = data.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (
            high is not None and value > high):
        limit = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise RequestError(400, f"'{name}' must be an integer {limit}", param=name)
    return value


def _prompt_text(messages: object) -> str:
    if not isinstance(messages, list) or not messages:
        raise RequestError(400, "'messages' must be a non-empty list", param="messages")
    parts: list[str] = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise RequestError(400, f"messages[{i}] needs a 'role'", param="messages")
        content = message.get("content", "")
        if isinstance(content, list):  # content parts: keep the text ones
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        if not isinstance(content, str):
            raise RequestError(400, f"messages[{i}].content must be text", param="messages")
        parts.append(content)
    return "\n".join(parts)


def parse_chat_request(raw: bytes) -> ChatRequest:
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RequestError(400, f"the request body is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise RequestError(400, "the request body must be a JSON object")
    model = data.get("model")
    if not isinstance(model, str) or not model:
        raise RequestError(400, "'model' is required", param="model")
    options = data.get("stream_options") or {}
    if not isinstance(options, dict):
        raise RequestError(400, "'stream_options' must be an object", param="stream_options")
    max_tokens = _int_field(data, "max_completion_tokens", 1, None)
    return ChatRequest(
        model=model,
        prompt_text=_prompt_text(data.get("messages")),
        stream=bool(data.get("stream", False)),
        n=_int_field(data, "n", 1, MAX_N) or 1,
        max_tokens=max_tokens or _int_field(data, "max_tokens", 1, None),
        include_usage=bool(options.get("include_usage", False)),
        has_stream_options="stream_options" in data,
    )


@dataclass
class ChoicePlan:
    """What one choice will say: reasoning and content as sent, and why it ends."""

    index: int
    reasoning: str
    content: str
    finish_reason: str

    @property
    def tokens(self) -> int:
        return estimate_tokens(self.reasoning) + estimate_tokens(self.content)


def plan_choice(reply: Reply, index: int, style: ReasoningStyle, max_tokens: int | None,
                force_length: bool) -> ChoicePlan:
    """Shape a reply for the reasoning style, truncated by max_tokens or a length fault."""
    reasoning, content = reply.reasoning, reply.content
    if style == "think" and reasoning:
        reasoning, content = "", f"<think>\n{reasoning}\n</think>\n\n{content}"
    elif style == "none":
        reasoning = ""
    total = len(reasoning) + len(content)
    limit = max_tokens * CHARS_PER_TOKEN if max_tokens else total
    if force_length:
        limit = min(limit, total // 2)
    if total <= limit:
        return ChoicePlan(index, reasoning, content, reply.finish_reason)
    kept_reasoning = reasoning[:limit]
    kept_content = content[:max(0, limit - len(kept_reasoning))]
    return ChoicePlan(index, kept_reasoning, kept_content, "length")


@dataclass(frozen=True)
class Piece:
    index: int
    kind: str  # "reasoning" or "content"
    text: str


def _split(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


def stream_pieces(plans: list[ChoicePlan], chunk_chars: int) -> list[Piece]:
    """Every choice's deltas, interleaved round-robin as a batched server would send them."""
    queues = [[Piece(p.index, "reasoning", t) for t in _split(p.reasoning, chunk_chars)]
              + [Piece(p.index, "content", t) for t in _split(p.content, chunk_chars)]
              for p in plans]
    out: list[Piece] = []
    for step in range(max((len(q) for q in queues), default=0)):
        out += [q[step] for q in queues if step < len(q)]
    return out


@dataclass
class Envelope:
    """The fields every chunk of one response shares."""

    id: str
    created: int
    model: str

    def chunk(self, choices: list[DeltaChoice], usage: Usage | None = None) -> Chunk:
        out: Chunk = {"id": self.id, "object": "chat.completion.chunk",
                      "created": self.created, "model": self.model, "choices": choices}
        if usage is not None:
            out["usage"] = usage
        return out


def delta_choice(index: int, delta: Delta, finish_reason: str | None = None) -> DeltaChoice:
    return {"index": index, "delta": delta, "logprobs": None, "finish_reason": finish_reason}


def piece_delta(piece: Piece, style: ReasoningStyle) -> Delta:
    if piece.kind != "reasoning":
        return {"content": piece.text}
    if style == "reasoning_content":
        return {"reasoning_content": piece.text}
    return {"reasoning": piece.text}


def usage_dict(prompt_tokens: int, completion_tokens: int) -> Usage:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


def completion_payload(envelope: Envelope, plans: list[ChoicePlan], style: ReasoningStyle,
                       prompt_tokens: int) -> ChatCompletion:
    """A non-streamed ``chat.completion``."""
    choices: list[MessageChoice] = []
    for plan in plans:
        message: AssistantMessage = {"role": "assistant", "content": plan.content}
        if plan.reasoning and style == "reasoning_content":
            message["reasoning_content"] = plan.reasoning
        elif plan.reasoning:
            message["reasoning"] = plan.reasoning
        choices.append({"index": plan.index, "message": message, "logprobs": None,
                        "finish_reason": plan.finish_reason})
    return {"id": envelope.id, "object": "chat.completion", "created": envelope.created,
            "model": envelope.model, "choices": choices,
            "usage": usage_dict(prompt_tokens, sum(p.tokens for p in plans))}
