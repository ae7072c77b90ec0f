"""Turning the openai package's exceptions into ``ModelError``s a user can act on."""

from __future__ import annotations

from typing import Any

import openai

from cudal1_tui.errors import ModelError
from cudal1_tui.llm.completion import Completion

SERVERS_HINT = ("start vLLM, SGLang, llama.cpp or Ollama (see docs/model-servers.md) or set "
                "OPENAI_BASE_URL; the built-in proposer still works")


class StreamCut(ModelError):
    """The stream stopped before its end ([DONE] or a finish_reason); the partial text is kept."""

    def __init__(self, message: str, *, partial: list[Completion], chars: int) -> None:
        super().__init__(message, fix="retry the round; if it keeps happening, check the "
                                       "model server's log (out of memory? restarted?)")
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


def server_message(exc: openai.APIStatusError) -> str:
    """The error text the server sent, from an OpenAI-style body or the raw text."""
    body: Any = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, dict) else inner
        if isinstance(message, str) and message:
            return message
    try:
        text = exc.response.text.strip()
    except Exception:
        text = ""
    return text[:500] or exc.message


def is_retryable(exc: Exception) -> bool:
    return isinstance(exc, openai.APIStatusError) and (
        exc.status_code >= 500 or exc.status_code == 429)


def to_model_error(exc: Exception, *, base_url: str, model: str, attempts: int = 1,
                   read_timeout_s: float | None = None) -> ModelError:
    """A user-facing error for an exception raised before any reply text arrived."""
    if isinstance(exc, ModelError):
        return exc
    if isinstance(exc, openai.APITimeoutError):
        waited = f" within {read_timeout_s:g} s" if read_timeout_s else ""
        return ModelError(f"the model server at {base_url} did not answer{waited}",
                          fix="check the server is not overloaded, or raise request_timeout_s")
    if isinstance(exc, openai.APIConnectionError):
        return ModelError(f"no model server at {base_url} ({_cause(exc)})", fix=SERVERS_HINT)
    if isinstance(exc, openai.APIStatusError):
        return _status_error(exc, base_url=base_url, model=model, attempts=attempts)
    return ModelError(f"the model request failed: {type(exc).__name__}: {exc}",
                      fix="check the model server's log")


def _cause(exc: BaseException) -> str:
    cause = exc.__cause__ or exc.__context__
    return str(cause) if cause else str(exc)


def _status_error(exc: openai.APIStatusError, *, base_url: str, model: str,
                  attempts: int) -> ModelError:
    code, message = exc.status_code, server_message(exc)
    if code == 404:
        return ModelError(f"the model server at {base_url} has no model {model!r}: {message}",
                          fix="pick a served model (`cudal1-tui doctor` lists them) with "
                              "--model or CUDAL1_MODEL, or leave it empty for the first one")
    if code in (401, 403):
        return ModelError(f"the model server refused the API key (HTTP {code}): {message}",
                          fix="set OPENAI_API_KEY (or api_key in the config file)")
    if code >= 500:
        tries = f" after {attempts} attempts" if attempts > 1 else ""
        return ModelError(f"the model server failed (HTTP {code}){tries}: {message}",
                          fix="check the model server's log; retries is a setting")
    return ModelError(f"the model server rejected the request (HTTP {code}): {message}",
                      fix="check the sampling settings (max_tokens within the model's context, "
                          "n) and the server's log")
