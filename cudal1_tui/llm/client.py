"""The model client: any OpenAI-compatible server (vLLM, SGLang, llama.cpp, Ollama, replay).

Synchronous by design: the engine calls it from a worker thread. Failures raise ``ModelError``
(``cudal1_tui.errors``) with a message and a fix; two subclasses carry partial replies:
``StreamCut`` (the stream stopped before its end) and ``ModelCancelled`` (the ``cancel`` event
was set). A reply that hits the length limit is not an error: ``Completion.truncated``.
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
from cudal1_tui.llm.completion import Completion, estimate_tokens
from cudal1_tui.llm.errors import ModelCancelled, is_retryable, to_model_error
from cudal1_tui.llm.run import Job, OnChunk, RunContext, StreamRun
from cudal1_tui.store.records import Message, SamplingSettings


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
        self._timeout = openai.Timeout(settings.request_timeout_s,
                                       connect=settings.connect_timeout_s)
        self._client = openai.OpenAI(base_url=self.base_url, api_key=settings.api_key or "EMPTY",
                                     timeout=self._timeout, max_retries=0)
        self._model = ""
        self._n_supported = True  # False once the server refused or ignored n > 1

    # -- models ------------------------------------------------------------------------

    def list_models(self) -> list[str]:
        """The ids the server lists at ``/v1/models``."""
        try:
            page = self._client.models.list()
        except openai.OpenAIError as exc:
            raise to_model_error(exc, base_url=self.base_url, model=self.settings.model,
                                 read_timeout_s=self.settings.request_timeout_s) from None
        return [model.id for model in page.data]

    def resolve_model(self) -> str:
        """``settings.model`` checked against the served ones, or the first served model."""
        if self._model:
            return self._model
        served = self.list_models()
        wanted = self.settings.model
        if wanted and wanted not in served:
            listed = ", ".join(served) or "none"
            raise ModelError(f"the model server at {self.base_url} does not serve {wanted!r}; "
                             f"it serves: {listed}",
                             fix="set model to one of them (--model, CUDAL1_MODEL or the config "
                                 "file), or leave it empty to use the first")
        if not served:
            raise ModelError(f"the model server at {self.base_url} lists no models",
                             fix="load a model in the server, or set model explicitly")
        self._model = wanted or served[0]
        return self._model

    # -- chat ----------------------------------------------------------------------------

    def default_sampling(self) -> SamplingSettings:
        s = self.settings
        return SamplingSettings(temperature=s.temperature, top_p=s.top_p,
                                max_tokens=s.max_tokens, n=s.candidates_per_round)

    def stream_chat(self, messages: list[Message], *, n: int = 1,
                    sampling: SamplingSettings | None = None, on_chunk: OnChunk | None = None,
                    cancel: threading.Event | None = None) -> list[Completion]:
        """Stream ``n`` choices; ``on_chunk(choice, "reasoning"|"content", text)`` as they come.

        Runs in the caller's thread (callbacks too). Raises ``ModelError``; ``StreamCut`` and
        ``ModelCancelled`` keep the partial completions in ``.partial``. ``sampling.n`` is
        ignored: ``n`` decides.
        """
        if n < 1:
            raise ValueError("n must be at least 1")
        if not messages:
            raise ValueError("messages must not be empty")
        model = self.resolve_model()
        chosen = sampling or self.default_sampling()
        wire = [cast(ChatCompletionMessageParam, {"role": m.role, "content": m.content})
                for m in messages]

        def open_stream(job: Job, abort: threading.Event) -> Any:
            return self._open(wire, model, chosen, job, abort)

        context = RunContext(open_stream=open_stream, base_url=self.base_url, model=model,
                             read_timeout_s=self.settings.request_timeout_s,
                             prompt_tokens=sum(estimate_tokens(m.content) for m in messages))
        run = StreamRun(context=context, n=n, use_api_n=self._n_supported, on_chunk=on_chunk,
                        cancel=cancel or threading.Event())
        try:
            return run.execute()
        finally:
            if run.n_rejected:
                self._n_supported = False

    def _open(self, wire: list[ChatCompletionMessageParam], model: str,
              sampling: SamplingSettings, job: Job, abort: threading.Event) -> Any:
        """Send the request; 5xx and 429 are retried ``settings.retries`` times with backoff."""
        seed: int | openai.Omit = openai.omit
        if sampling.seed is not None:
            seed = sampling.seed + (job.slots[0] if job.n == 1 else 0)
        for attempt in range(1, self.settings.retries + 2):
            job.attempts = attempt
            try:
                return self._client.chat.completions.create(
                    model=model, messages=wire, stream=True,
                    stream_options={"include_usage": True},
                    temperature=sampling.temperature, top_p=sampling.top_p,
                    max_tokens=sampling.max_tokens, n=job.n if job.n > 1 else openai.omit,
                    seed=seed)
            except openai.APIStatusError as exc:
                if not is_retryable(exc) or attempt > self.settings.retries:
                    raise
            if abort.wait(self.backoff_s * 2 ** (attempt - 1)):
                raise ModelCancelled([])
        raise AssertionError("unreachable")

    # -- lifetime ------------------------------------------------------------------------

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> ModelClient:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
