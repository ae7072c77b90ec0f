"""What ``doctor`` says about the model server: listed models, and a one-token chat call when the
list is not enough (``/v1/models`` failed, or does not hold the named model)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from cudal1_tui.config import Settings
from cudal1_tui.errors import ModelError
from cudal1_tui.llm.client import ModelClient
from cudal1_tui.llm.client_errors import ServerError
from cudal1_tui.records import Message, SamplingSettings

ProbeStatus = Literal["ok", "missing", "warn"]
PROBE_MESSAGES = [Message("user", "Say OK.")]
PROBE_SAMPLING = SamplingSettings(temperature=0.0, top_p=1.0, max_tokens=1)


@dataclass(frozen=True)
class ServerReport:
    status: ProbeStatus
    detail: str
    fix: str = ""


def probe_server(settings: Settings) -> ServerReport:
    """Never raises: every failure is a report with its own fix."""
    try:
        client = ModelClient(replace(settings, retries=0))
    except ModelError as exc:
        return ServerReport("missing", exc.message, exc.fix)
    with client:
        try:
            served = client.list_models()
        except ServerError as exc:
            return _without_list(client, exc)
        return _with_list(client, served)


def _without_list(client: ModelClient, exc: ServerError) -> ServerReport:
    model = client.settings.model
    if exc.kind == "unreachable":
        fallback = ("the built-in proposer still works" if client.settings.use_builtin
                    else "nothing can propose candidates (use_builtin is off)")
        return ServerReport("warn", f"{exc.message}; {fallback}", exc.fix)
    if exc.kind in ("auth", "not_openai", "timeout") or not model:
        fix = exc.fix if model or exc.kind != "server" else (
            "name the model with --model (or CUDAL1_MODEL): the chat call does not need "
            "/v1/models")
        return ServerReport("missing", exc.message, fix)
    listed = f"/v1/models failed ({_short(exc)})"
    chat = _chat_problem(client)
    if chat is None:
        return ServerReport("ok", f"{client.base_url}: {listed}; the chat call with {model!r} "
                                  "works")
    return ServerReport("missing", f"{listed}; the chat call with {model!r} failed: "
                                   f"{chat.message}", chat.fix)


def _with_list(client: ModelClient, served: list[str]) -> ServerReport:
    model, url = client.settings.model, client.base_url
    listed = ", ".join(served) or "no models"
    if not model or model in served:
        if not served:
            return ServerReport("missing", f"{url} lists no models",
                                "load a model in the server, or name one with --model")
        return ServerReport("ok", f"{url}: {listed}")
    chat = _chat_problem(client)
    if chat is None:
        return ServerReport("ok", f"{url}: the chat call with {model!r} works (not in "
                                  f"/v1/models, which lists: {listed})")
    return ServerReport("missing", chat.message, chat.fix)


def _chat_problem(client: ModelClient) -> ModelError | None:
    """None when a one-token chat call with the named model works."""
    try:
        client.stream_chat(PROBE_MESSAGES, sampling=PROBE_SAMPLING)
    except ModelError as exc:
        return exc
    return None


def _short(exc: ServerError) -> str:
    """``HTTP 500: Internal Server Error`` out of a full message."""
    text = exc.message.split(": ", 1)[-1] if exc.status else exc.message
    return f"HTTP {exc.status}: {text}" if exc.status else text
