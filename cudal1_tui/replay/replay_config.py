"""The replay server's knobs and its deterministic failure plan.

Chat requests are numbered from 1 in the order they arrive. Each fault fires either on a
listed request number (``fail_requests=(2,)`` fails request #2) or at a rate; rate draws use a
generator seeded by ``(seed, request number)``, so a given request's fate does not depend on
thread timing.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from cudal1_tui.replay.quirks import QUIRKS, Quirk
from cudal1_tui.replay.reply_source import Reply

ReasoningStyle = Literal["reasoning", "reasoning_content", "think", "none"]
REASONING_STYLES: tuple[ReasoningStyle, ...] = ("reasoning", "reasoning_content", "think", "none")
DEFAULT_MODEL = "cudal1-replay"

# Called with a chat request's number and the text of its messages, in the handler thread,
# once the request is accepted and before any of its answer (headers included) is sent: a
# server that works before it answers (benchmarks/generating_server.py runs a model on the
# GPU). An exception from it answers the request with HTTP 500.
BeforeReply = Callable[[int, str], None]


@dataclass
class ReplayConfig:
    """What to serve and how to misbehave.

    ``reasoning_style``: ``reasoning`` (vLLM, Ollama), ``reasoning_content`` (SGLang,
    llama.cpp), ``think`` (inline ``<think>…</think>`` in the content) or ``none`` (dropped).
    """

    source: Path | None = None  # trace.jsonl, session dir or script (see replay.reply_source)
    replies: tuple[Reply, ...] = ()  # scripted in code; used instead of ``source`` when set
    model: str = ""  # advertised name; empty: the source's model, else DEFAULT_MODEL
    host: str = "127.0.0.1"
    port: int = 0  # 0: an ephemeral port
    reasoning_style: ReasoningStyle = "reasoning"
    chunk_chars: int = 24  # characters per streamed delta
    latency_s: float = 0.0  # pause before each chunk
    seed: int = 0
    fail_rate: float = 0.0  # share of requests answered with HTTP 500
    fail_requests: tuple[int, ...] = ()
    cut_rate: float = 0.0  # share of streams closed mid-way, without [DONE]
    cut_requests: tuple[int, ...] = ()
    cut_fraction: float = 0.5  # share of the reply's pieces sent before the cut
    hang_rate: float = 0.0  # share of streams that go silent mid-way
    hang_requests: tuple[int, ...] = ()
    hang_s: float = 0.0  # how long a hang lasts before the stream goes on
    length_rate: float = 0.0  # share of replies truncated with finish_reason "length"
    length_requests: tuple[int, ...] = ()
    reject_n: bool = False  # answer n > 1 with HTTP 400, as llama.cpp does
    ignore_n: bool = False  # answer one choice whatever n says, as Ollama does
    quirk: Quirk = "none"  # answer chat requests as a not-quite-OpenAI server (replay.quirks)
    quirk_requests: tuple[int, ...] = ()  # the chat requests the quirk hits; empty: all
    retry_after: str = ""  # the Retry-After header of the rate_limit quirk (seconds or a date)
    api_key: str = ""  # when set, requests without "Authorization: Bearer <api_key>" get 401
    reject_stream_options: bool = False  # answer stream_options with HTTP 400 (older servers)
    models_status: int = 200  # answer /v1/models with this status (500: as transformers serve)
    before_reply: BeforeReply | None = None  # work done before each chat answer (see above)

    def validate(self) -> None:
        if self.reasoning_style not in REASONING_STYLES:
            raise ValueError(f"reasoning_style must be one of {REASONING_STYLES}")
        if self.chunk_chars < 1:
            raise ValueError("chunk_chars must be at least 1")
        for name in ("fail_rate", "cut_rate", "hang_rate", "length_rate", "cut_fraction"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be between 0 and 1")
        if self.quirk not in QUIRKS:
            raise ValueError(f"quirk must be one of {QUIRKS}")
        if self.latency_s < 0 or self.hang_s < 0:
            raise ValueError("latency_s and hang_s must not be negative")


@dataclass(frozen=True)
class Faults:
    """What goes wrong with one request."""

    fail: bool = False
    cut: bool = False
    hang: bool = False
    length: bool = False
    quirk: Quirk = "none"


def faults_for(config: ReplayConfig, number: int) -> Faults:
    """The faults of chat request ``number`` (1-based), deterministic under the seed."""
    rng = random.Random(f"{config.seed}:{number}")
    draws = [rng.random() for _ in range(4)]

    def fires(listed: tuple[int, ...], rate: float, draw: float) -> bool:
        return number in listed or draw < rate

    return Faults(
        fail=fires(config.fail_requests, config.fail_rate, draws[0]),
        cut=fires(config.cut_requests, config.cut_rate, draws[1]),
        hang=fires(config.hang_requests, config.hang_rate, draws[2]),
        length=fires(config.length_requests, config.length_rate, draws[3]),
        quirk=config.quirk if not config.quirk_requests or number in config.quirk_requests
        else "none",
    )
