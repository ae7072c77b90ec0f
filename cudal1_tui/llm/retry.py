"""When to send a request again, and how long to wait first (``Retry-After`` honoured)."""

from __future__ import annotations

import time
from email.utils import parsedate_to_datetime

import httpx2
import openai

MAX_WAIT_S = 60.0  # the longest pause a Retry-After may ask of us before we give up


def retry_after_s(headers: httpx2.Headers, now: float | None = None) -> float | None:
    """The wait a response asks for: ``retry-after-ms``, or ``Retry-After`` in seconds or as an
    HTTP date; None when absent or unreadable."""
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = (headers.get("retry-after") or "").strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def is_retryable(exc: Exception) -> bool:
    """A 5xx, a 429 or no response before the headers timeout: worth another try."""
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code >= 500 or exc.status_code == 429
    return isinstance(exc, openai.APITimeoutError)


def backoff_s(first_s: float, attempt: int) -> float:
    """The pause after failed attempt ``attempt`` (1-based): doubling from ``first_s``."""
    return float(first_s * 2 ** (attempt - 1))


def is_dropped_connection(exc: Exception) -> bool:
    """A connection that broke (reset, closed mid-way) rather than one refused or timed out:
    often a kept-alive connection the server had already closed (uvicorn does after an HTTP
    500), worth one immediate try on a fresh connection whatever ``retries`` says."""
    if not isinstance(exc, openai.APIConnectionError) or isinstance(exc, openai.APITimeoutError):
        return False
    cause = str(exc.__cause__ or exc.__context__ or exc).lower()
    return any(word in cause for word in DROPPED_WORDS)


DROPPED_WORDS = ("reset", "closed", "disconnect", "incomplete", "broken pipe", "eof")
