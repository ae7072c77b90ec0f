"""The replay server's ``before_reply`` hook, over real HTTP: it runs once per accepted chat
request, before any of the answer is sent, and its failure answers that request with 500."""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from cudal1_tui.replay import ReplayServer

Start = Callable[..., ReplayServer]


def _post(server: ReplayServer, body: dict[str, Any]) -> tuple[int, bytes, float]:
    """Status, body and the seconds until the response headers came."""
    url = urlsplit(server.base_url)
    conn = http.client.HTTPConnection(url.hostname or "", url.port, timeout=10)
    started = time.monotonic()
    conn.request("POST", "/v1/chat/completions", body=json.dumps(body).encode(),
                 headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    headers_s = time.monotonic() - started
    try:
        return response.status, response.read(), headers_s
    finally:
        conn.close()


def _chat(server: ReplayServer, text: str, **fields: Any) -> tuple[int, bytes, float]:
    return _post(server, {"model": server.model,
                          "messages": [{"role": "user", "content": text}], **fields})


def test_the_hook_runs_before_each_answer(replay_server: Start) -> None:
    calls: list[tuple[int, str]] = []
    lock = threading.Lock()

    def hook(number: int, prompt: str) -> None:
        time.sleep(0.2)  # work before the answer: the headers wait for it
        with lock:
            calls.append((number, prompt))

    server = replay_server(before_reply=hook)
    status, raw, headers_s = _chat(server, "first prompt", stream=True)
    assert status == 200 and raw.rstrip().endswith(b"data: [DONE]")
    assert headers_s >= 0.2
    status, _, _ = _chat(server, "second prompt")
    assert status == 200
    assert [n for n, _ in calls] == [1, 2]
    assert "first prompt" in calls[0][1] and "second prompt" in calls[1][1]


def test_a_refused_request_never_reaches_the_hook(replay_server: Start) -> None:
    calls: list[int] = []
    server = replay_server(before_reply=lambda number, _: calls.append(number))
    status, _, _ = _post(server, {"model": "not-served",
                                  "messages": [{"role": "user", "content": "x"}]})
    assert status == 404
    assert calls == []


def test_a_failing_hook_answers_500_and_the_server_goes_on(replay_server: Start) -> None:
    def hook(number: int, _: str) -> None:
        if number == 1:
            raise RuntimeError("CUDA out of memory")

    server = replay_server(before_reply=hook)
    status, raw, _ = _chat(server, "x", stream=True)
    assert status == 500
    assert "CUDA out of memory" in json.loads(raw)["error"]["message"]
    assert [r.status for r in server.requests] == [500]
    status, _, _ = _chat(server, "x", stream=True)
    assert status == 200
