"""Sending one streamed chat request: timeouts in two phases, retries, and a look at the body.

The headers must arrive within ``headers_timeout_s`` (a server that took the connection and
hangs is retried with backoff, then named); once they have, the stream may go quiet for up to
``read_timeout_s`` between chunks (a CPU server's prefill of a long prompt counts). A 429 waits
as long as its ``Retry-After`` asks, up to ``retry.MAX_WAIT_S``, and says so through ``notify``.
A 200 whose body is not a server-sent-event stream is named before any chunk is read.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx2
import openai
from openai.types.chat import ChatCompletionMessageParam

from cudal1_tui.llm.client_errors import ModelCancelled
from cudal1_tui.llm.diagnosis import (
    diagnose,
    no_reply,
    rate_limited,
    server_message,
    stream_body_problem,
)
from cudal1_tui.llm.retry import (
    MAX_WAIT_S,
    backoff_s,
    is_dropped_connection,
    is_retryable,
    retry_after_s,
)
from cudal1_tui.records import SamplingSettings

Notify = Callable[[str], None]


@dataclass
class RequestPlan:
    """Everything one chat request needs; ``include_usage`` drops to False if refused."""

    client: openai.OpenAI
    base_url: str
    model: str
    wire: list[ChatCompletionMessageParam]
    sampling: SamplingSettings
    retries: int
    backoff_s: float
    connect_timeout_s: float
    headers_timeout_s: float
    read_timeout_s: float
    include_usage: bool = True


def open_stream(plan: RequestPlan, n: int, seed_offset: int, abort: threading.Event,
                notify: Notify) -> Any:
    """The opened ``openai.Stream``; raises ``ServerError`` or ``ModelCancelled``."""
    attempt, reconnected = 0, False
    while True:
        attempt += 1
        try:
            stream = _create(plan, n, seed_offset)
        except openai.APIError as exc:
            if is_dropped_connection(exc) and not reconnected:
                reconnected, attempt = True, attempt - 1  # a free try on a fresh connection
                continue
            if _refuses_usage_option(plan, exc):
                plan.include_usage = False  # an older server: usage is estimated instead
                continue
            wait = _wait_before_retry(plan, exc, attempt, notify)
            if abort.wait(wait):
                raise ModelCancelled([]) from None
            continue
        if abort.is_set():
            stream.close()
            raise ModelCancelled([])
        problem = stream_body_problem(stream.response, plan.base_url)
        if problem is not None:
            stream.close()
            raise problem
        _allow_quiet_stream(stream.response, plan.read_timeout_s)
        return stream


def _refuses_usage_option(plan: RequestPlan, exc: openai.APIError) -> bool:
    return plan.include_usage and isinstance(exc, openai.BadRequestError) and \
        "stream_options" in str(exc.body or exc.message)


def _create(plan: RequestPlan, n: int, seed_offset: int) -> Any:
    sampling = plan.sampling
    seed: int | openai.Omit = openai.omit
    if sampling.seed is not None:
        seed = sampling.seed + seed_offset
    options: Any = {"include_usage": True} if plan.include_usage else openai.omit
    return plan.client.chat.completions.create(
        model=plan.model, messages=plan.wire, stream=True, stream_options=options,
        temperature=sampling.temperature, top_p=sampling.top_p, max_tokens=sampling.max_tokens,
        n=n if n > 1 else openai.omit, seed=seed,
        timeout=openai.Timeout(plan.headers_timeout_s, connect=plan.connect_timeout_s))


def _wait_before_retry(plan: RequestPlan, exc: openai.APIError, attempt: int,
                       notify: Notify) -> float:
    """How long to wait before the next attempt (said through ``notify``), or raise."""
    base, tries = plan.base_url, plan.retries + 1
    if not is_retryable(exc):
        raise diagnose(exc, base_url=base, model=plan.model, attempts=attempt) from None
    if isinstance(exc, openai.RateLimitError):
        asked = retry_after_s(exc.response.headers)
        message = server_message(exc.body, _text(exc.response))
        if asked is not None and asked > MAX_WAIT_S:
            raise rate_limited(base, message, f"it asks to wait {asked:g} s (Retry-After), "
                               f"longer than the {MAX_WAIT_S:g} s we wait") from None
        if attempt >= tries:
            raise rate_limited(base, message, f"still limited after {attempt} attempt(s)") \
                from None
        wait = asked if asked is not None else backoff_s(plan.backoff_s, attempt)
        why = "as its Retry-After asks" if asked is not None else "(no Retry-After given)"
        notify(f"the server at {base} is rate limiting requests (HTTP 429): waiting {wait:g} s "
               f"{why}, then attempt {attempt + 1} of {tries}")
        return wait
    if attempt >= tries:
        if isinstance(exc, openai.APITimeoutError):
            raise no_reply(base, plan.headers_timeout_s, attempt) from None
        raise diagnose(exc, base_url=base, model=plan.model, attempts=attempt) from None
    wait = backoff_s(plan.backoff_s, attempt)
    if isinstance(exc, openai.APITimeoutError):
        what = f"no reply within {plan.headers_timeout_s:g} s"
    else:
        what = f"HTTP {getattr(exc, 'status_code', '?')}"
    notify(f"the server at {base} failed ({what}): retrying in {wait:g} s "
           f"(attempt {attempt + 1} of {tries})")
    return wait


def _text(response: httpx2.Response) -> str:
    try:
        return response.text
    except Exception:
        return ""


def _allow_quiet_stream(response: httpx2.Response, read_timeout_s: float) -> None:
    """Once the headers are in, let the body go quiet for ``read_timeout_s`` between chunks.

    The transport reads its timeouts from the request's ``timeout`` extension when the body is
    first read, so raising ``read`` here applies to the stream that follows.
    """
    timeouts = response.request.extensions.get("timeout")
    if isinstance(timeouts, dict):
        timeouts["read"] = read_timeout_s
