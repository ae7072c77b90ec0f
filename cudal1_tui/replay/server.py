"""The replay server: real HTTP (stdlib ``ThreadingHTTPServer``), OpenAI-compatible.

Routes: ``GET /v1/models``, ``GET /health``, ``POST /v1/chat/completions`` (streamed as SSE
with HTTP/1.1 chunked encoding, or a plain ``chat.completion``). Use it in tests as::

    with ReplayServer(ReplayConfig(replies=(Reply("hi"),))) as server:
        client = OpenAI(base_url=server.base_url, api_key="EMPTY")
"""

from __future__ import annotations

import contextlib
import itertools
import json
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from cudal1_tui.replay.openai_wire import (
    ChatRequest,
    ChoicePlan,
    Envelope,
    RequestError,
    completion_payload,
    delta_choice,
    error_body,
    estimate_tokens,
    parse_chat_request,
    piece_delta,
    plan_choice,
    stream_pieces,
    usage_dict,
)
from cudal1_tui.replay.quirks import STREAM_QUIRKS, answer, stream_quirk_event
from cudal1_tui.replay.replay_config import DEFAULT_MODEL, Faults, ReplayConfig, faults_for
from cudal1_tui.replay.reply_source import ReplyBook, load_replies

MAX_BODY = 32 * 1024 * 1024


@dataclass(frozen=True)
class RequestLog:
    """One chat request as the server saw it (tests read ``ReplayServer.requests``)."""

    number: int
    model: str
    n: int
    stream: bool
    faults: Faults
    status: int


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    app: ReplayApp


class ReplayApp:
    """State shared by the handler threads: replies, counters, the stop signal."""

    def __init__(self, config: ReplayConfig, book: ReplyBook,
                 log: Callable[[str], None] | None) -> None:
        self.config = config
        self.book = book
        self.model = config.model or book.model or DEFAULT_MODEL
        self.stop = threading.Event()
        self.requests: list[RequestLog] = []
        self.client_left: list[int] = []  # requests whose client went away mid-stream
        self._log = log
        self._counter = itertools.count(1)
        self._lock = threading.Lock()

    def next_number(self) -> int:
        with self._lock:
            return next(self._counter)

    def record(self, entry: RequestLog) -> None:
        with self._lock:
            self.requests.append(entry)
        if self._log:
            problems = [name for name, on in vars(entry.faults).items()
                        if on and on != "none"]
            extra = f" faults={','.join(problems)}" if problems else ""
            self._log(f"#{entry.number} {entry.model} n={entry.n} stream={entry.stream} "
                      f"-> {entry.status}{extra}")

    def pause(self, seconds: float) -> bool:
        """Sleep unless the server stops; True when it is still running."""
        return not self.stop.wait(seconds) if seconds > 0 else not self.stop.is_set()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the app logs requests itself."""

    @property
    def app(self) -> ReplayApp:
        return self.server.app

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        if not self._authorized():
            self._unauthorized()
            return
        faults = faults_for(self.app.config, 0)
        if self._quirk_answers(faults):
            self._answer_quirk(faults)
            return
        if path in {"/v1/models", "/models"} and self.app.config.models_status != 200:
            self.send_raw(self.app.config.models_status, "text/plain; charset=utf-8",
                          b"Internal Server Error")
        elif path in {"/v1/models", "/models"}:
            data = [{"id": self.app.model, "object": "model", "created": 0,
                     "owned_by": "cudal1-replay"}]
            self._send_json(200, {"object": "list", "data": data})
        elif path in {"/health", "/v1/health"}:
            self._send_json(200, {"status": "ok"})
        else:
            self._send_json(404, error_body(f"no route {self.path}", "NotFoundError", 404))

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        if path not in {"/v1/chat/completions", "/chat/completions"}:
            self._drain_body()
            self._send_json(404, error_body(f"no route {self.path}", "NotFoundError", 404))
            return
        number = self.app.next_number()
        faults = faults_for(self.app.config, number)
        if faults.quirk == "hang_headers" and not self.app.pause(self.app.config.hang_s):
            return
        # every request is recorded before it is answered: a client that has its answer may
        # look at ``requests`` at once
        if not self._authorized():
            self._drain_body()
            self._record(number, None, faults, 401)
            self._unauthorized()
            return
        if self._quirk_answers(faults):
            self._drain_body()
            self._record(number, None, faults, 0)
            self._answer_quirk(faults)
            return
        request: ChatRequest | None = None
        try:
            request = self._read_request()
            self._check(request, faults, number)
            self._before_reply(number, request)
        except RequestError as exc:
            self._record(number, request, faults, exc.status)
            self._send_json(exc.status, exc.body())
            return
        self._record(number, request, faults, 200)
        if self.app.config.ignore_n:
            request.n = 1
        plans = self._plans(request, faults)
        envelope = Envelope(id=f"chatcmpl-replay-{number}", created=int(time.time()),
                            model=self.app.model)
        if request.stream:
            self._stream(envelope, request, plans, faults)
        else:
            self._complete(envelope, request, plans, faults)

    def _authorized(self) -> bool:
        """False when the API key is required and wrong (answered 401, as vLLM does)."""
        key = self.app.config.api_key
        return not key or self.headers.get("Authorization", "") == f"Bearer {key}"

    def _unauthorized(self) -> None:
        self.send_raw(401, "application/json", json.dumps({"error": "Unauthorized"}).encode())

    @staticmethod
    def _quirk_answers(faults: Faults) -> bool:
        """Does the request's quirk answer it whole (not OpenAI at all)?"""
        return faults.quirk not in STREAM_QUIRKS and faults.quirk not in {"none", "hang_headers"}

    def _answer_quirk(self, faults: Faults) -> None:
        if faults.quirk == "drop":
            self._cut()
        else:
            answer(faults.quirk, self, self.app.config.retry_after)

    def send_raw(self, status: int, content_type: str, body: bytes,
                 headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _record(self, number: int, request: ChatRequest | None, faults: Faults,
                status: int) -> None:
        model, n, stream = (request.model, request.n, request.stream) if request else ("", 0, False)
        self.app.record(RequestLog(number, model, n, stream, faults, status))

    def _drain_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self.close_connection = True
            raise RequestError(413, f"request body over {MAX_BODY} bytes")
        return self.rfile.read(length) if length > 0 else b""

    def _read_request(self) -> ChatRequest:
        return parse_chat_request(self._drain_body())

    def _check(self, request: ChatRequest, faults: Faults, number: int) -> None:
        if request.model != self.app.model:
            raise RequestError(404, f"The model `{request.model}` does not exist. Served: "
                               f"{self.app.model}", kind="NotFoundError", param="model")
        if request.has_stream_options and self.app.config.reject_stream_options:
            raise RequestError(400, "Unrecognized request argument supplied: stream_options",
                               param="stream_options")
        if request.n > 1 and self.app.config.reject_n:
            raise RequestError(400, "Only one completion choice is allowed (n > 1)", param="n")
        if faults.fail:
            raise RequestError(500, f"injected failure of request #{number}",
                               kind="InternalServerError")

    def _before_reply(self, number: int, request: ChatRequest) -> None:
        hook = self.app.config.before_reply
        if hook is None:
            return
        try:
            hook(number, request.prompt_text)
        except Exception as exc:  # the hook's failure is the request's, not the server's
            raise RequestError(500, f"before_reply failed on request #{number}: {exc}",
                               kind="InternalServerError") from exc

    def _plans(self, request: ChatRequest, faults: Faults) -> list[ChoicePlan]:
        style = self.app.config.reasoning_style
        return [plan_choice(self.app.book.take(request.prompt_text), i, style,
                            request.max_tokens, faults.length) for i in range(request.n)]

    def _send_json(self, status: int, payload: Mapping[str, object]) -> None:
        self.send_raw(status, "application/json", json.dumps(payload).encode())

    def _complete(self, envelope: Envelope, request: ChatRequest, plans: list[ChoicePlan],
                  faults: Faults) -> None:
        if faults.hang and not self.app.pause(self.app.config.hang_s):
            return
        if faults.cut:
            self._cut()
            return
        prompt_tokens = estimate_tokens(request.prompt_text)
        self._send_json(200, completion_payload(envelope, plans, self.app.config.reasoning_style,
                                                prompt_tokens))

    def _stream(self, envelope: Envelope, request: ChatRequest, plans: list[ChoicePlan],
                faults: Faults) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            self._stream_body(envelope, request, plans, faults)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client went away (cancelled): stop generating
            self.app.client_left.append(int(envelope.id.rsplit("-", 1)[-1]))

    def _stream_body(self, envelope: Envelope, request: ChatRequest, plans: list[ChoicePlan],
                     faults: Faults) -> None:
        config, app = self.app.config, self.app
        style = config.reasoning_style
        self._event(envelope.chunk([delta_choice(p.index, {"role": "assistant", "content": ""})
                                    for p in plans]))
        pieces = stream_pieces(plans, config.chunk_chars)
        cut_at = int(len(pieces) * config.cut_fraction) if faults.cut else -1
        hang_at = len(pieces) // 2 if faults.hang else -1
        for position, piece in enumerate(pieces):
            if position == cut_at:
                self._cut()
                return
            pause = config.hang_s if position == hang_at else config.latency_s
            if not app.pause(pause):
                return
            self._event(envelope.chunk([delta_choice(piece.index, piece_delta(piece, style))]))
            if position == 0 and faults.quirk in STREAM_QUIRKS:
                self._write_chunk(stream_quirk_event(faults.quirk))
        if faults.cut:  # a reply too short to cut inside: cut before the finish
            self._cut()
            return
        for plan in plans:
            self._event(envelope.chunk([delta_choice(plan.index, {}, plan.finish_reason)]))
        if request.include_usage:
            usage = usage_dict(estimate_tokens(request.prompt_text), sum(p.tokens for p in plans))
            self._event(envelope.chunk([], usage))
        self._write_chunk(b"data: [DONE]\n\n")
        self._write_chunk(b"")

    def _event(self, payload: Mapping[str, object]) -> None:
        self._write_chunk(b"data: " + json.dumps(payload).encode() + b"\n\n")

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):X}\r\n".encode() + data + b"\r\n")

    def _cut(self) -> None:
        """Drop the connection without finishing the body (no terminal chunk, no [DONE])."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)


class ReplayServer:
    """An OpenAI-compatible server in a background thread; a context manager."""

    def __init__(self, config: ReplayConfig, *, log: Callable[[str], None] | None = None) -> None:
        config.validate()
        if config.replies:
            book = ReplyBook(list(config.replies))
        elif config.source is not None:
            book = load_replies(config.source)
        else:
            raise ValueError("ReplayConfig needs a source or replies")
        self.config = config
        self.app = ReplayApp(config, book, log)
        self._httpd: _Server | None = None
        self._url = ""
        self._thread: threading.Thread | None = None

    @property
    def model(self) -> str:
        return self.app.model

    @property
    def requests(self) -> list[RequestLog]:
        return list(self.app.requests)

    @property
    def client_left(self) -> list[int]:
        """The chat requests (by number) whose client closed the stream before its end."""
        return list(self.app.client_left)

    @property
    def base_url(self) -> str:
        """``http://host:port/v1``; kept after ``stop()`` (then a closed port)."""
        if not self._url:
            raise RuntimeError("the replay server is not started")
        return self._url

    def bind(self) -> str:
        """Open the listening socket (OSError when the port is taken); the base URL."""
        self._httpd = _Server((self.config.host, self.config.port), _Handler)
        self._httpd.app = self.app
        host, port = self._httpd.server_address[:2]
        shown = host if isinstance(host, str) else host.decode()
        self._url = f"http://{shown}:{port}/v1"
        return self._url

    def start(self) -> str:
        """Serve in a daemon thread; returns the base URL (``http://host:port/v1``)."""
        url = self.bind()
        assert self._httpd is not None
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.05},
                                        name="replay-server", daemon=True)
        self._thread.start()
        return url

    def serve_forever(self) -> None:
        """Serve in this thread until ``stop()`` or KeyboardInterrupt."""
        if self._httpd is None:
            self.bind()
        assert self._httpd is not None
        try:
            self._httpd.serve_forever(poll_interval=0.2)
        finally:
            self._close()

    def stop(self) -> None:
        self.app.stop.set()
        if self._httpd is not None and self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout=5)
        self._close()

    def _close(self) -> None:
        if self._httpd is not None:
            self._httpd.server_close()
            self._httpd = None
        self._thread = None

    def __enter__(self) -> ReplayServer:
        if self._httpd is None:
            self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
