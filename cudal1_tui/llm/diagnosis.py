"""What went wrong with the model server, named for what it is, with a fix that matches the cause.

Every message names the server's URL. The fix says "start a server" only when nothing listens
there; a key the server rejects, a rate limit, a wrong base URL, a wrong model name and a server
that never answers each get their own words.
"""

from __future__ import annotations

import json
import re
from typing import Any

import httpx2
import openai

from cudal1_tui.llm.client_errors import ServerError
from cudal1_tui.llm.retry import is_dropped_connection

START_SERVER = ("start one (vLLM: `vllm serve MODEL`; SGLang, llama.cpp `llama-server`, Ollama or "
                "`transformers serve`: see docs/model-servers.md) or set OPENAI_BASE_URL to "
                "where it listens")
BASE_URL_FIX = ("set base_url (--base-url, OPENAI_BASE_URL) to the server's OpenAI endpoint, "
                "e.g. http://localhost:8000/v1")
OPENAI_PATHS = "OpenAI-compatible servers serve /v1/chat/completions"
SNIPPET_CHARS = 200
BODY_PREFIX_BYTES = 4096


def snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    flat = " ".join(text.split())
    return flat[:limit] + ("…" if len(flat) > limit else "")


def _json_lines(text: str) -> bool:
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < 2:
        return False
    try:
        return all(isinstance(json.loads(line), dict) for line in lines[:3])
    except ValueError:
        return False


def body_kind(content_type: str, text: str) -> str | None:
    """What a body is, in words, when it is not an OpenAI JSON object; None when it is one."""
    ctype, start = content_type.lower(), text.lstrip()[:64].lower()
    if "html" in ctype or start.startswith(("<!doctype html", "<html")):
        return "an HTML page"
    if "ndjson" in ctype or _json_lines(text):
        return "NDJSON (one JSON object per line, as Ollama's native /api/chat sends)"
    if not start:
        return "an empty body"
    try:
        data = json.loads(text)
    except ValueError:
        return "plain text" if "json" not in ctype else "a body that is not valid JSON"
    return None if isinstance(data, dict) else "JSON that is not an object"


def server_message(body: Any, text: str) -> str:
    """The error text a server sent: OpenAI's ``error.message``, FastAPI's ``detail``, or raw."""
    if isinstance(body, dict):
        for key in ("error", "message", "detail"):
            value = body.get(key)
            if isinstance(value, dict):
                value = value.get("message")
            if isinstance(value, list):
                value = "; ".join(str(v.get("msg", v)) if isinstance(v, dict) else str(v)
                                  for v in value)
            if isinstance(value, str) and value:
                return value
    return snippet(text, 500)


def unreachable(base_url: str, cause: str) -> ServerError:
    return ServerError(f"no model server at {base_url} ({cause})", fix=START_SERVER,
                       kind="unreachable")


def not_openai(base_url: str, status: int, kind: str, text: str) -> ServerError:
    shown = f"; it begins: {snippet(text, 120)!r}" if kind == "plain text" else ""
    hint = " (Ollama's OpenAI endpoint is http://localhost:11434/v1)" if "NDJSON" in kind else ""
    return ServerError(f"the server at {base_url} answered with {kind} (HTTP {status}){shown}: "
                       f"is the base URL right? {OPENAI_PATHS}{hint}",
                       fix=BASE_URL_FIX, kind="not_openai", status=status)


def no_reply(base_url: str, waited_s: float, attempts: int) -> ServerError:
    tries = f" ({attempts} attempts)" if attempts > 1 else ""
    return ServerError(f"no reply from the server at {base_url} within {waited_s:g} s{tries}: it "
                       "took the connection but sent no response",
                       fix="check the server's log (stuck? overloaded? still loading the model?); "
                           "headers_timeout_s sets how long to wait", kind="timeout")


def rate_limited(base_url: str, message: str, detail: str) -> ServerError:
    return ServerError(f"the server at {base_url} is rate limiting requests (HTTP 429): "
                       f"{message}; {detail}",
                       fix="wait a while and run again, or ask for fewer candidates per round "
                           "(each candidate is one request)", kind="rate_limited", status=429)


def bad_chunk(base_url: str, raw: str) -> ServerError:
    return ServerError(f"the server at {base_url} sent a chunk that is not an OpenAI "
                       f"chat.completion chunk: {snippet(raw)}",
                       fix="check that the base URL is the server's OpenAI endpoint (/v1) and "
                           "the server's log; another server may answer this port",
                       kind="bad_chunk")


def mentions_model(message: str, model: str) -> bool:
    lowered = message.lower()
    return (bool(model) and model.lower() in lowered) or bool(
        re.search(r"\bmodel\b.*\b(not found|does not exist|not exist|unknown|pinned)", lowered))


def status_error(exc: openai.APIStatusError, *, base_url: str, model: str,
                 attempts: int = 1) -> ServerError:
    """An HTTP error status, named by its cause."""
    code, response = exc.status_code, exc.response
    text = _text(response)
    kind = body_kind(response.headers.get("content-type", ""), text)
    message = server_message(exc.body, text)
    if code in (401, 403):
        return ServerError(f"the server at {base_url} rejected the API key (HTTP {code}): "
                           f"{message}",
                           fix="set the key the server expects: OPENAI_API_KEY or api_key in the "
                               "config file", kind="auth", status=code)
    if code == 429:
        return rate_limited(base_url, message, "no retry left")
    if code in (400, 404, 422) and kind is None and mentions_model(message, model):
        return ServerError(f"the server at {base_url} does not serve model {model!r}: {message}",
                           fix="check the model name (--model or CUDAL1_MODEL)", kind="model",
                           status=code)
    if kind is not None and code < 500:
        return not_openai(base_url, code, kind, text)
    if code == 404:
        return ServerError(f"the server at {base_url} has no such route (HTTP 404: {message}): "
                           f"is the base URL right? {OPENAI_PATHS}", fix=BASE_URL_FIX,
                           kind="not_openai", status=code)
    if code >= 500:
        tries = f" after {attempts} attempts" if attempts > 1 else ""
        if kind == "an HTML page":
            message = "an HTML page (a proxy in front of a model server that is down?)"
        return ServerError(f"the server at {base_url} failed (HTTP {code}){tries}: {message}",
                           fix="check the model server's log; `retries` sets how often a 5xx "
                               "is retried", kind="server", status=code)
    fix = "the server's message says why"
    if re.search(r"token|context|length", message, re.I):
        fix = "lower max_tokens (or the prompt) to fit the model's context length"
    return ServerError(f"the server at {base_url} refused the request (HTTP {code}): {message}",
                       fix=fix, kind="request", status=code)


def _text(response: httpx2.Response) -> str:
    try:
        return response.text
    except Exception:
        return ""


def diagnose(exc: Exception, *, base_url: str, model: str, attempts: int = 1,
             waited_s: float | None = None) -> ServerError:
    """A user-facing error for an exception raised before any reply text arrived."""
    if isinstance(exc, ServerError):
        return exc
    if isinstance(exc, openai.APITimeoutError):
        return no_reply(base_url, waited_s or 0.0, attempts)
    if isinstance(exc, openai.APIConnectionError) and is_dropped_connection(exc):
        return ServerError(f"the server at {base_url} dropped the connection ({_cause(exc)})",
                           fix="check the model server's log (did it crash or restart?); is "
                               "another program listening on this port?", kind="server")
    if isinstance(exc, openai.APIConnectionError):
        return unreachable(base_url, _cause(exc))
    if isinstance(exc, openai.APIStatusError):
        return status_error(exc, base_url=base_url, model=model, attempts=attempts)
    if isinstance(exc, json.JSONDecodeError):
        return bad_chunk(base_url, exc.doc)
    if isinstance(exc, openai.APIError):
        return ServerError(f"the server at {base_url} reported an error: {exc.message}",
                           fix="check the model server's log", kind="server")
    return ServerError(f"the request to the server at {base_url} failed: "
                       f"{type(exc).__name__}: {exc}", fix="check the model server's log",
                       kind="server")


def _cause(exc: BaseException) -> str:
    cause = exc.__cause__ or exc.__context__
    text = str(cause) if cause else str(exc)
    return "connection refused" if "refused" in text.lower() else text


def stream_body_problem(response: httpx2.Response, base_url: str) -> ServerError | None:
    """A 200 answer to a streamed request that is not a server-sent-event stream, named."""
    content_type = response.headers.get("content-type", "")
    if not content_type or "event-stream" in content_type.lower():
        return None
    raw = b""
    for part in response.iter_bytes():
        raw += part
        if len(raw) >= BODY_PREFIX_BYTES:
            break
    text = raw.decode("utf-8", "replace")
    kind = body_kind(content_type, text) or "a JSON body instead of a stream"
    return not_openai(base_url, response.status_code, kind, text)
