"""The model side of a round: is a model there, and one streamed request per slot."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from cudal1_tui.config import Settings
from cudal1_tui.errors import Cudal1Error, ModelError
from cudal1_tui.llm.client import ModelClient
from cudal1_tui.llm.completion import CHARS_PER_TOKEN, Completion
from cudal1_tui.records import Message, SamplingSettings

# (slot, kind, text, tokens so far, tokens/s)
ChunkSink = Callable[[int, str, str, int, float], None]


@dataclass
class Availability:
    ok: bool
    model: str = ""
    message: str = ""
    fix: str = ""


class ModelGateway:
    """Owns the client; thread-safe to call ``generate`` from several slot threads."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.client: ModelClient | None = None
        self.availability = Availability(ok=False, message="not checked yet")

    def check(self) -> Availability:
        """Reach the server and pick the model; never raises."""
        self.close()
        try:
            self.client = ModelClient(self.settings)
            model = self.client.resolve_model()
        except Cudal1Error as exc:
            fallback = ("running the built-in proposer only" if self.settings.use_builtin
                        else "no candidates can be proposed (--no-builtin)")
            self.availability = Availability(
                ok=False, message=f"no model: {exc.message}; {fallback}", fix=exc.fix)
            return self.availability
        self.availability = Availability(ok=True, model=model,
                                         message=self.client.models_problem)
        return self.availability

    def sampling(self) -> SamplingSettings:
        s = self.settings
        return SamplingSettings(temperature=s.temperature, top_p=s.top_p,
                                max_tokens=s.max_tokens, n=1, seed=None)

    def generate(self, slot: int, messages: list[Message], sampling: SamplingSettings,
                 sink: ChunkSink, cancel: threading.Event,
                 notify: Callable[[str], None] | None = None) -> Completion:
        """One streamed completion for ``slot``; raises ``ModelError`` (incl. cancelled);
        ``notify(text)`` when the client waits (a rate limit, a retry)."""
        if self.client is None or not self.availability.ok:
            raise ModelError("no model is available", fix=self.availability.fix)
        first: tuple[float, int] | None = None  # tok/s counts from the first text, not the queue
        chars = 0

        def on_chunk(_index: int, kind: str, text: str) -> None:
            nonlocal chars, first
            chars += len(text)
            tokens = -(-chars // CHARS_PER_TOKEN)
            first = first or (time.monotonic(), tokens)
            elapsed = time.monotonic() - first[0]
            sink(slot, kind, text, tokens, (tokens - first[1]) / elapsed if elapsed > 0 else 0.0)

        completions = self.client.stream_chat(messages, n=1, sampling=sampling,
                                              on_chunk=on_chunk, cancel=cancel, on_notice=notify)
        if not completions:
            raise ModelError("the model server answered no choices",
                             fix="check the model server's log")
        done = completions[0]  # the final count: the server's usage where it sent one
        sink(slot, "content", "", done.usage.completion_tokens, done.tokens_per_s)
        return done

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None
