"""One ``stream_chat`` call: reader threads feed a queue; the caller's thread assembles.

Each HTTP request (a *job*) is read in its own daemon thread. The caller's thread takes chunks
from the queue, calls ``on_chunk`` (so callbacks run in the caller's thread), watches the
``cancel`` event every 50 ms and, on cancel, closes the streams and returns at once without
waiting for the readers.

A job asks for ``n`` choices through the API's ``n``; when the server rejects that (HTTP 400)
or answers fewer choices (Ollama ignores ``n``), the missing choices are asked for as
concurrent single requests.
"""

from __future__ import annotations

import contextlib
import json
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import openai
from openai.types.chat import ChatCompletionChunk

from cudal1_tui.llm.client_errors import ModelCancelled, ServerError, StreamCut
from cudal1_tui.llm.completion import Completion, Usage
from cudal1_tui.llm.diagnosis import bad_chunk, diagnose, not_openai
from cudal1_tui.llm.stream import ChoiceState, apportion_usage, delta_parts

POLL_S = 0.05
OnChunk = Callable[[int, str, str], None]
OnNotice = Callable[[str], None]


@dataclass
class Job:
    """One HTTP request: its choice ``i`` fills slot ``slots[i]``."""

    slots: list[int]
    stream: Any = None  # openai.Stream[ChatCompletionChunk] once opened
    opened: bool = False
    usage: Usage | None = None
    chunks: int = 0  # chunks received

    @property
    def n(self) -> int:
        return len(self.slots)


Opener = Callable[[Job, threading.Event, OnNotice], Any]


@dataclass
class RunContext:
    """What a run needs from the client."""

    open_stream: Opener  # sends the request (with retries, notices); returns the Stream
    base_url: str
    model: str
    read_timeout_s: float
    prompt_tokens: int  # estimate, used when the server reports no usage


@dataclass
class StreamRun:
    context: RunContext
    n: int
    use_api_n: bool
    on_chunk: OnChunk | None
    cancel: threading.Event
    on_notice: OnNotice | None = None  # waits and retries, said in words
    n_rejected: bool = False  # the server does not honour n > 1 (read by the client)
    _events: queue.Queue[tuple[str, Job, Any]] = field(default_factory=queue.Queue)
    _abort: threading.Event = field(default_factory=threading.Event)
    _jobs: list[Job] = field(default_factory=list)
    _owner: dict[int, Job] = field(default_factory=dict)  # slot -> the job that fills it
    _active: int = 0
    _states: dict[int, ChoiceState] = field(default_factory=dict)

    def execute(self) -> list[Completion]:
        started = time.monotonic()
        self._states = {slot: ChoiceState(slot, started) for slot in range(self.n)}
        if self.n > 1 and self.use_api_n:
            self._launch([list(range(self.n))])
        else:
            self._launch([[slot] for slot in range(self.n)])
        try:
            self._drain()
        except BaseException:
            self._stop_readers()
            raise
        return self._completions()

    # -- the caller's loop -------------------------------------------------------------

    def _drain(self) -> None:
        while self._active:
            if self.cancel.is_set():
                raise ModelCancelled(self._completions())
            try:
                kind, job, payload = self._events.get(timeout=POLL_S)
            except queue.Empty:
                continue
            if kind == "notice":
                if self.on_notice is not None:
                    self.on_notice(payload)
                continue
            if kind != "chunk":
                self._active -= 1
            if not self._owner_of(job):
                continue  # a superseded job (its slots were re-asked as singles)
            if kind == "chunk":
                self._on_chunk(job, payload)
            elif kind == "error":
                self._on_error(job, payload)
            else:
                self._on_end(job)

    def _owner_of(self, job: Job) -> bool:
        return any(self._owner.get(slot) is job for slot in job.slots)

    def _emit(self, slot: int, parts: list[tuple[str, str]]) -> None:
        if self.on_chunk is None:
            return
        for kind, text in parts:
            self.on_chunk(slot, kind, text)

    def _on_chunk(self, job: Job, chunk: ChatCompletionChunk) -> None:
        job.chunks += 1
        if chunk.usage is not None:
            job.usage = Usage(chunk.usage.prompt_tokens, chunk.usage.completion_tokens)
        for choice in chunk.choices:
            if not 0 <= choice.index < job.n:
                continue
            slot = job.slots[choice.index]
            state = self._states[slot]
            state.seen = True
            state.model = chunk.model or state.model
            for field_kind, text in delta_parts(choice.delta):
                self._emit(slot, state.add(field_kind, text))
            if choice.finish_reason:
                self._emit(slot, state.finish(choice.finish_reason))

    def _on_error(self, job: Job, exc: Exception) -> None:
        if isinstance(exc, ModelCancelled):
            raise ModelCancelled(self._completions())
        refused = isinstance(exc, ServerError) and exc.status == 400
        if refused and job.n > 1 and not job.opened:
            self.n_rejected = True
            self._launch([[slot] for slot in job.slots])
            return
        if job.opened:
            raise self._cut(job, self._reason(exc))
        raise diagnose(exc, base_url=self.context.base_url, model=self.context.model)

    def _on_end(self, job: Job) -> None:
        if not job.chunks:
            raise not_openai(self.context.base_url, 200, "no server-sent events (no `data:` "
                             "lines) in a text/event-stream body", "")
        states = [self._states[slot] for slot in job.slots]
        unseen = [s.index for s in states if not s.seen]
        if job.n > 1 and unseen and len(unseen) < job.n:
            self.n_rejected = True  # the server ignored n: ask for the rest one by one
            self._launch([[slot] for slot in unseen])
        if any(s.seen and not s.finish_reason for s in states) or len(unseen) == job.n:
            raise self._cut(job, "no finish_reason before the stream ended")

    def _cut(self, job: Job, reason: str) -> StreamCut:
        chars = sum(self._states[slot].chars for slot in job.slots)
        return StreamCut(reason, base_url=self.context.base_url, partial=self._completions(),
                         chars=chars)

    def _reason(self, exc: Exception) -> str:
        """Why an opened stream stopped, in words."""
        if isinstance(exc, ServerError):
            return exc.message
        if isinstance(exc, json.JSONDecodeError):
            return bad_chunk(self.context.base_url, exc.doc).message
        if isinstance(exc, openai.APITimeoutError):
            return f"no data for {self.context.read_timeout_s:g} s (request_timeout_s)"
        if isinstance(exc, openai.APIError) and not isinstance(exc, openai.APIConnectionError):
            return f"the server reported an error mid-stream: {exc.message}"
        cause = exc.__cause__ or exc.__context__
        return f"the connection dropped ({type(exc).__name__}: {cause or exc})"

    def _completions(self) -> list[Completion]:
        out: list[Completion] = []
        for job in {id(j): j for j in self._owner.values()}.values():
            states = [self._states[slot] for slot in job.slots if self._owner[slot] is job]
            usages = apportion_usage(states, self.context.prompt_tokens, job.usage)
            out += [s.completion(u, self.context.model) for s, u in zip(states, usages,
                                                                          strict=True)]
        return sorted(out, key=lambda c: c.index)

    # -- reader threads ----------------------------------------------------------------

    def _launch(self, groups: list[list[int]]) -> None:
        for slots in groups:
            job = Job(slots)
            self._jobs.append(job)
            for slot in slots:
                self._owner[slot] = job
            self._active += 1
            threading.Thread(target=self._read, args=(job,), name="model-stream",
                             daemon=True).start()

    def _read(self, job: Job) -> None:
        try:
            job.stream = self.context.open_stream(
                job, self._abort, lambda text: self._events.put(("notice", job, text)))
            job.opened = True
            for chunk in job.stream:
                if self._abort.is_set():
                    return
                self._check_shape(chunk)
                self._events.put(("chunk", job, chunk))
            self._events.put(("end", job, None))
        except Exception as exc:
            self._events.put(("error", job, exc))
        finally:
            _close(job.stream)

    def _check_shape(self, chunk: Any) -> None:
        choices = getattr(chunk, "choices", None)
        if isinstance(choices, list) and all(
                isinstance(getattr(c, "index", None), int) and getattr(c, "delta", None)
                is not None for c in choices):
            return
        try:
            raw = json.dumps(chunk.model_dump(exclude_none=True))
        except Exception:
            raw = repr(chunk)
        raise bad_chunk(self.context.base_url, raw)

    def _stop_readers(self) -> None:
        self._abort.set()
        for job in self._jobs:
            _close(job.stream)


def _close(stream: Any) -> None:
    if stream is None:
        return
    with contextlib.suppress(Exception):
        stream.close()

