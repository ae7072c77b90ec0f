"""Ways a server that is not quite an OpenAI API answers: scripted for the client's diagnoses.

Each quirk imitates something met in the field: a web page at the wrong URL (HTML 404), Ollama's
native NDJSON stream (also under a ``text/event-stream`` header, as a proxy may relabel it), a
plain-text answer, a rate limit with ``Retry-After``, a server that accepts the connection and
never sends headers, one that drops the connection without an answer (what a kept-alive
connection the server had closed looks like), streams whose chunks are not
``chat.completion.chunk`` objects (wrong shape, or not JSON at all), and a stream that reports
an error mid-way (``data: {"error": …}``, as vLLM does when generation fails).
"""

from __future__ import annotations

import json
from typing import Literal, Protocol

Quirk = Literal["none", "html", "ndjson", "ndjson_as_sse", "plain", "rate_limit",
                "hang_headers", "drop", "bad_chunk", "not_json_chunk", "error_event"]
QUIRKS: tuple[Quirk, ...] = ("none", "html", "ndjson", "ndjson_as_sse", "plain", "rate_limit",
                             "hang_headers", "drop", "bad_chunk", "not_json_chunk", "error_event")
# answered inside a 200 stream, after its first piece
STREAM_QUIRKS = frozenset({"bad_chunk", "not_json_chunk", "error_event"})

HTML_PAGE = ("<!DOCTYPE html>\n<html><head><title>404 Not Found</title></head>\n"
             "<body><h1>Not Found</h1><p>The requested URL was not found on this server.</p>"
             "</body></html>\n")
PLAIN_TEXT = "Hello! This is a web server, not a model server.\n"
WRONG_SHAPE_CHUNK = {"model": "llama3", "message": {"role": "assistant", "content": "Hi"},
                     "done": False}
NOT_JSON_CHUNK = "Internal error: the worker died <oops>"
ERROR_EVENT = {"error": {"message": "CUDA out of memory while generating",
                         "type": "InternalServerError", "code": 500}}


class Writer(Protocol):
    """What a quirk needs from the request handler."""

    def send_raw(self, status: int, content_type: str, body: bytes,
                 headers: dict[str, str] | None = None) -> None: ...


def answer(quirk: Quirk, writer: Writer, retry_after: str) -> None:
    """Answer a request as the quirk says (not for ``STREAM_QUIRKS`` or ``hang_headers``)."""
    if quirk == "html":
        writer.send_raw(404, "text/html; charset=utf-8", HTML_PAGE.encode())
    elif quirk == "plain":
        writer.send_raw(200, "text/plain; charset=utf-8", PLAIN_TEXT.encode())
    elif quirk in ("ndjson", "ndjson_as_sse"):
        lines = [{**WRONG_SHAPE_CHUNK, "message": {"role": "assistant", "content": word}}
                 for word in ("Hello", " there")]
        lines.append({"model": "llama3", "done": True, "done_reason": "stop"})
        body = "".join(json.dumps(line) + "\n" for line in lines).encode()
        content_type = "application/x-ndjson" if quirk == "ndjson" else "text/event-stream"
        writer.send_raw(200, content_type, body)
    elif quirk == "rate_limit":
        message = {"error": {"message": "Rate limit reached: too many requests",
                             "type": "rate_limit_error", "param": None, "code": 429}}
        headers = {"Retry-After": retry_after} if retry_after else {}
        writer.send_raw(429, "application/json", json.dumps(message).encode(), headers)
    else:
        raise ValueError(f"quirk {quirk!r} is not answered whole")


def stream_quirk_event(quirk: Quirk) -> bytes:
    """The bad ``data:`` event a stream quirk sends after the first real piece."""
    if quirk == "bad_chunk":
        return b"data: " + json.dumps(WRONG_SHAPE_CHUNK).encode() + b"\n\n"
    if quirk == "error_event":
        return b"data: " + json.dumps(ERROR_EVENT).encode() + b"\n\n"
    return b"data: " + NOT_JSON_CHUNK.encode() + b"\n\n"
