"""The model client: any OpenAI-compatible server (vLLM, SGLang, llama.cpp, Ollama, replay).

Synchronous by design: the engine calls it from a worker thread. Failures raise ``ServerError``
(``llm.client_errors``: a ``ModelError`` whose ``kind`` names the cause, with a fix for that
cause); two kinds carry partial replies: ``StreamCut`` (the stream stopped before its end) and
``ModelCancelled`` (the ``cancel`` event was set). A reply that hits the length limit is not an
error: ``Completion.truncated``.
"""

from __future__ import annotations

import threading
from types import TracebackType
from typing import Any, cast
from urllib.parse import urlsplit, urlunsplit

import openai
from openai.types.chat import ChatCompletionMessageParam

from cudal1_tui.config import Settings
from cudal1_tui.errors import ModelError
from cudal1_tui.llm.client_errors import ServerError
from cudal1_tui.llm.completion import Completion, estimate_tokens
from cudal1_tui.llm.diagnosis import diagnose
from cudal1_tui.llm.request import RequestPlan, open_stream
from cudal1_tui.llm.retry import is_dropped_connection
from cudal1_tui.llm.run import Job, OnChunk, OnNotice, RunContext, StreamRun
from cudal1_tui.records import Message, SamplingSettings


def normalize_base_url(url: str) -> str:
    """``http://host:8000`` → ``http://host:8000/v1``; trailing slashes dropped."""
    url = url.strip().rstrip("/")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ModelError(f"the model server URL {url!r} is not an http(s) URL",
                         fix="set base_url / OPENAI_BASE_URL to e.g. http://localhost:8000/v1")
    if not parts.path:
        parts = parts._replace(path="/v1")
    return urlunsplit(parts)


class ModelClient:
    """Lists models, picks one, streams chat completions with retries and cancellation."""

    def __init__(self, settings: Settings, *, backoff_s: float = 0.5) -> None:
        self.settings = settings
        self.base_url = normalize_base_url(settings.base_url)
        self.backoff_s = backoff_s  # first retry pause; doubles each retry
        timeout = openai.Timeout(settings.headers_timeout_s, connect=settings.connect_timeout_s)
        self._client = openai.OpenAI(base_url=self.base_url, api_key=settings.api_key or "EMPTY",
                                     timeout=timeout, max_retries=0)
        self._model = ""
        self._n_supported = True  # False once the server refused or ignored n > 1
        self._usage_option = True  # False once the server refused stream_options
        self.models_problem = ""  # why /v1/models gave no list, when a named model is used

    # -- models ------------------------------------------------------------------------

    def list_models(self) -> list[str]:
        """The ids the server lists at ``/v1/models``."""
        for last_try in (False, True):
            try:
                return [model.id for model in self._client.models.list().data]
            except openai.OpenAIError as exc:
                if not last_try and is_dropped_connection(exc):
                    continue  # a kept-alive connection the server had closed: a fresh one
                raise diagnose(exc, base_url=self.base_url, model=self.settings.model,
                               waited_s=self.settings.headers_timeout_s) from None
        raise AssertionError("unreachable")

    def resolve_model(self) -> str:
        """The model to ask: ``settings.model`` as named (the server's list is not required to
        hold it: the chat call says whether it is served), else the first served model."""
        if self._model:
            return self._model
        wanted = self.settings.model
        try:
            served = self.list_models()
        except ServerError as exc:
            if not wanted or exc.kind in ("unreachable", "auth", "not_openai", "timeout"):
                raise _no_list(exc, wanted) from None
            self.models_problem = f"/v1/models failed: {exc.message}"
            self._model = wanted
            return wanted
        if not wanted and not served:
            raise ServerError(f"the server at {self.base_url} lists no models",
                              fix="load a model in the server, or name one with --model",
                              kind="no_models")
        if wanted and wanted not in served:
            self.models_problem = (f"/v1/models does not list {wanted!r} (it lists: "
                                   f"{', '.join(served) or 'nothing'})")
        self._model = wanted or served[0]
        return self._model

    def model_fix(self) -> str:
        """The fix line for a wrong model name: the served models, when the server lists them."""
        try:
            served = self.list_models()
        except ModelError:
            served = []
        if served:
            return f"pick a model the server lists: {', '.join(served[:10])} (--model)"
        return "check the model name (--model or CUDAL1_MODEL); /v1/models gave no list"

    # -- chat ----------------------------------------------------------------------------

    def default_sampling(self) -> SamplingSettings:
        s = self.settings
        return SamplingSettings(temperature=s.temperature, top_p=s.top_p,
                                max_tokens=s.max_tokens, n=s.candidates_per_round)

    def stream_chat(self, messages: list[Message], *, n: int = 1,
                    sampling: SamplingSettings | None = None, on_chunk: OnChunk | None = None,
                    cancel: threading.Event | None = None,
                    on_notice: OnNotice | None = None) -> list[Completion]:
        """Stream ``n`` choices; ``on_chunk(choice, "reasoning"|"content", text)`` as they come,
        ``on_notice(text)`` when waiting (a rate limit, a retry).

        Runs in the caller's thread (callbacks too). Raises ``ServerError``; ``StreamCut`` and
        ``ModelCancelled`` keep the partial completions in ``.partial``. ``sampling.n`` is
        ignored: ``n`` decides.
        """
        if n < 1:
            raise ValueError("n must be at least 1")
        if not messages:
            raise ValueError("messages must not be empty")
        model = self.resolve_model()
        plan = self._plan(messages, model, sampling or self.default_sampling())

        def opener(job: Job, abort: threading.Event, notify: OnNotice) -> Any:
            return open_stream(plan, job.n, job.slots[0] if job.n == 1 else 0, abort, notify)

        context = RunContext(open_stream=opener, base_url=self.base_url, model=model,
                             read_timeout_s=self.settings.request_timeout_s,
                             prompt_tokens=sum(estimate_tokens(m.content) for m in messages))
        run = StreamRun(context=context, n=n, use_api_n=self._n_supported, on_chunk=on_chunk,
                        cancel=cancel or threading.Event(), on_notice=on_notice)
        try:
            return run.execute()
        except ServerError as exc:
            if exc.kind == "model":
                exc.fix = self.model_fix()
            raise
        finally:
            self._usage_option = plan.include_usage
            if run.n_rejected:
                self._n_supported = False

    def _plan(self, messages: list[Message], model: str,
              sampling: SamplingSettings) -> RequestPlan:
        s = self.settings
        wire = [cast(ChatCompletionMessageParam, {"role": m.role, "content": m.content})
                for m in messages]
        return RequestPlan(client=self._client, base_url=self.base_url, model=model, wire=wire,
                           sampling=sampling, retries=s.retries, backoff_s=self.backoff_s,
                           connect_timeout_s=s.connect_timeout_s,
                           headers_timeout_s=s.headers_timeout_s,
                           read_timeout_s=s.request_timeout_s, include_usage=self._usage_option)

    # -- lifetime ------------------------------------------------------------------------

    def close(self) -> None:
        """Close every connection: a server that notices stops generating for us."""
        self._client.close()

    def __enter__(self) -> ModelClient:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def _no_list(exc: ServerError, wanted: str) -> ServerError:
    """Why no model could be picked: the list failed and none was named (or the server is out
    of reach, whatever was named)."""
    if wanted or exc.kind in ("unreachable", "auth", "not_openai", "timeout"):
        return exc
    return ServerError(f"{exc.message}; no model is named, so none can be picked",
                       fix="name the model with --model (or CUDAL1_MODEL); the chat call does not "
                           "need /v1/models", kind=exc.kind, status=exc.status)
