"""Each way a model server goes wrong, scripted in the replay server and diagnosed over real HTTP.

The message must name the cause and the fix must match it: "start one" only when nothing listens.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from email.utils import formatdate

import httpx2
import openai
import pytest

from cudal1_tui.config import Settings
from cudal1_tui.llm import ModelClient, ServerError, StreamCut
from cudal1_tui.llm.diagnosis import status_error
from cudal1_tui.llm.retry import retry_after_s
from cudal1_tui.records import Message
from cudal1_tui.replay import ReplayServer

MESSAGES = [Message("user", "Make diag_matmul fast.")]
Start = Callable[..., ReplayServer]
# A scripted hang lasts a minute (it ends early when the server stops); a request that must
# end before it gets a third of that: the bound tells a prompt end from waiting the hang out,
# not from a loaded host's scheduling (a thread can wait seconds for a core on a busy CI box).
HANG_S = 60.0
PROMPT_S = 20.0


def client_for(server: ReplayServer, **settings: object) -> ModelClient:
    return ModelClient(Settings(base_url=server.base_url, **settings),  # type: ignore[arg-type]
                       backoff_s=0.01)


def failure(server: ReplayServer, **settings: object) -> ServerError:
    with pytest.raises(ServerError) as info:
        client_for(server, **settings).stream_chat(MESSAGES)
    return info.value


def test_an_html_page_is_named_with_the_base_url_question(replay_server: Start) -> None:
    server = replay_server(quirk="html")
    error = failure(server, model="m")
    assert error.kind == "not_openai" and error.status == 404
    assert error.message == (f"the server at {server.base_url} answered with an HTML page "
                             "(HTTP 404): is the base URL right? OpenAI-compatible servers "
                             "serve /v1/chat/completions")
    assert "<html" not in error.message and "start one" not in error.fix
    assert "base_url" in error.fix


def test_an_html_page_without_a_model_is_still_named(replay_server: Start) -> None:
    error = failure(replay_server(quirk="html"))  # /v1/models answers HTML too
    assert error.kind == "not_openai" and "an HTML page (HTTP 404)" in error.message


def test_ndjson_is_named_and_points_at_ollamas_openai_endpoint(replay_server: Start) -> None:
    server = replay_server(quirk="ndjson", quirk_requests=(1,))
    error = failure(server)
    assert error.kind == "not_openai"
    assert "answered with NDJSON" in error.message and "(HTTP 200)" in error.message
    assert "11434/v1" in error.message and "cut after" not in error.message


def test_plain_text_is_named_and_quoted(replay_server: Start) -> None:
    error = failure(replay_server(quirk="plain", quirk_requests=(1,)))
    assert error.kind == "not_openai" and "answered with plain text (HTTP 200)" in error.message
    assert "not a model server" in error.message  # the first words of the body


def test_a_rejected_key_is_not_called_unreachable(replay_server: Start) -> None:
    server = replay_server(api_key="sk-right")
    error = failure(server, api_key="sk-wrong", model=server.model)
    assert error.kind == "auth" and error.status == 401
    assert f"the server at {server.base_url} rejected the API key (HTTP 401)" in error.message
    assert "unreachable" not in error.message and "start" not in error.fix
    assert "OPENAI_API_KEY" in error.fix
    assert failure(server, api_key="sk-wrong").kind == "auth"  # via /v1/models as well
    (done,) = client_for(server, api_key="sk-right").stream_chat(MESSAGES)
    assert done.content


def test_a_rate_limit_waits_as_retry_after_asks_and_says_so(replay_server: Start) -> None:
    server = replay_server(quirk="rate_limit", quirk_requests=(1,), retry_after="1")
    notices: list[str] = []
    started = time.monotonic()
    (done,) = client_for(server).stream_chat(MESSAGES, on_notice=notices.append)
    assert time.monotonic() - started >= 1.0  # the asked wait, not the 0.01 s backoff
    assert done.content
    assert len(notices) == 1 and "rate limiting requests (HTTP 429)" in notices[0]
    assert "waiting 1 s as its Retry-After asks, then attempt 2 of 3" in notices[0]


def test_a_rate_limit_longer_than_we_wait_gives_up_without_blaming_sampling(
        replay_server: Start) -> None:
    server = replay_server(quirk="rate_limit", retry_after="3600")
    started = time.monotonic()
    error = failure(server, model=server.model)
    assert time.monotonic() - started < PROMPT_S  # not the hour asked for
    assert error.kind == "rate_limited" and "asks to wait 3600 s" in error.message
    assert "Rate limit reached" in error.message  # the server's own words
    assert "sampling" not in error.fix and "max_tokens" not in error.fix
    assert len([r for r in server.requests if r.number]) == 1


def test_retry_after_reads_seconds_dates_and_milliseconds() -> None:
    now = time.time()
    assert retry_after_s(httpx2.Headers({"Retry-After": "7"})) == 7.0
    date = formatdate(now + 30, usegmt=True)
    assert 28 <= (retry_after_s(httpx2.Headers({"Retry-After": date}), now=now) or 0) <= 31
    assert retry_after_s(httpx2.Headers({"retry-after-ms": "250"})) == 0.25
    assert retry_after_s(httpx2.Headers({"Retry-After": "soon"})) is None
    assert retry_after_s(httpx2.Headers({})) is None


def test_a_hang_before_headers_is_retried_then_named(replay_server: Start) -> None:
    server = replay_server(quirk="hang_headers", hang_s=HANG_S)
    notices: list[str] = []
    started = time.monotonic()
    with pytest.raises(ServerError) as info:
        client_for(server, model=server.model, headers_timeout_s=0.3, retries=1).stream_chat(
            MESSAGES, on_notice=notices.append)
    assert time.monotonic() - started < PROMPT_S  # 2 × 0.3 s and a backoff, not the hang
    error = info.value
    assert error.kind == "timeout"
    assert error.message == (f"no reply from the server at {server.base_url} within 0.3 s "
                             "(2 attempts): it took the connection but sent no response")
    assert "headers_timeout_s" in error.fix and "start" not in error.fix
    assert notices == [f"the server at {server.base_url} failed (no reply within 0.3 s): "
                       "retrying in 0.01 s (attempt 2 of 2)"]


def test_a_hang_before_headers_then_an_answer_succeeds(replay_server: Start) -> None:
    server = replay_server(quirk="hang_headers", quirk_requests=(1,), hang_s=5.0)
    (done,) = client_for(server, model=server.model, headers_timeout_s=0.3).stream_chat(MESSAGES)
    assert done.content and done.finish_reason == "stop"


def test_a_quiet_stream_after_the_headers_gets_the_longer_read_timeout(
        replay_server: Start) -> None:
    """The headers timeout does not cut a stream that pauses (a slow prefill) after them."""
    server = replay_server(hang_requests=(1,), hang_s=0.6)
    (done,) = client_for(server, headers_timeout_s=0.2, request_timeout_s=5).stream_chat(MESSAGES)
    assert done.finish_reason == "stop"


@pytest.mark.parametrize("quirk, shown", [("bad_chunk", '"done": false'),
                                          ("not_json_chunk", "the worker died")])
def test_a_chunk_of_the_wrong_shape_is_named_and_the_text_before_it_kept(
        replay_server: Start, quirk: str, shown: str) -> None:
    server = replay_server(quirk=quirk, chunk_chars=8)
    with pytest.raises(StreamCut) as info:
        client_for(server).stream_chat(MESSAGES)
    cut = info.value
    assert (f"the server at {server.base_url} sent a chunk that is not an OpenAI "
            "chat.completion chunk: ") in cut.message
    assert shown in cut.message and "bug in cudal1-tui" not in cut.message
    assert cut.partial and cut.chars == 8  # the piece before the bad chunk is kept


def test_a_wrong_model_shows_the_servers_words_and_the_served_list(replay_server: Start) -> None:
    server = replay_server()
    error = failure(server, model="qwen-typo")
    assert error.kind == "model" and "The model `qwen-typo` does not exist" in error.message
    assert error.fix == f"pick a model the server lists: {server.model} (--model)"
    assert "start" not in error.fix


def test_a_named_model_is_tried_when_models_fails(replay_server: Start) -> None:
    """transformers serve answers /v1/models with HTTP 500 (no HF-cache layout)."""
    server = replay_server(models_status=500)
    client = client_for(server, model=server.model)
    (done,) = client.stream_chat(MESSAGES)
    assert done.content
    assert client.models_problem.startswith("/v1/models failed: the server at")
    assert "HTTP 500" in client.models_problem


def test_no_model_named_and_models_failing_says_to_name_one(replay_server: Start) -> None:
    error = failure(replay_server(models_status=500))
    assert error.kind == "server" and "HTTP 500" in error.message
    assert "no model is named" in error.message and "--model" in error.fix


def test_a_model_missing_from_the_list_is_still_tried(replay_server: Start) -> None:
    server = replay_server(model="served-name")
    client = client_for(server, model="served-name")
    client.resolve_model()
    assert client.models_problem == ""
    other = client_for(server, model="alias")
    assert other.resolve_model() == "alias"
    assert "does not list 'alias'" in other.models_problem


def test_cancel_while_waiting_for_headers_returns_promptly(replay_server: Start) -> None:
    server = replay_server(quirk="hang_headers", hang_s=HANG_S)
    cancel = threading.Event()
    threading.Timer(0.2, cancel.set).start()
    started = time.monotonic()
    with pytest.raises(Exception) as info:
        client_for(server, model=server.model).stream_chat(MESSAGES, cancel=cancel)
    assert time.monotonic() - started < PROMPT_S  # not the hang
    assert "cancelled" in str(info.value)


def test_an_error_reported_mid_stream_is_a_cut_with_the_servers_words(
        replay_server: Start) -> None:
    server = replay_server(quirk="error_event", chunk_chars=8)
    with pytest.raises(StreamCut) as info:
        client_for(server).stream_chat(MESSAGES)
    assert ("the server reported an error mid-stream: CUDA out of memory while generating"
            in info.value.message)
    assert info.value.chars == 8


def test_a_server_refusing_stream_options_is_asked_again_and_usage_estimated(
        replay_server: Start) -> None:
    server = replay_server(reject_stream_options=True)
    client = client_for(server)
    (done,) = client.stream_chat(MESSAGES)
    assert done.content and done.usage.estimated and done.usage.completion_tokens > 0
    assert [r.status for r in server.requests] == [400, 200]
    client.stream_chat(MESSAGES)  # remembered: no second refusal
    assert [r.status for r in server.requests] == [400, 200, 200]


@pytest.mark.parametrize("status, content_type, body, kind, words", [
    (502, "text/html", "<html><h1>502 Bad Gateway</h1></html>", "server",
     "failed (HTTP 502): an HTML page (a proxy in front of a model server that is down?)"),
    (404, "application/json", '{"error": {"message": "model \\"qwen3:8b\\" not found, try '
     'pulling it first", "type": "api_error"}}', "model", "not found, try pulling it first"),
    (400, "application/json", '{"detail": "Server is pinned to \'/m\'; requested \'qwen3:8b\'."}',
     "model", "Server is pinned to '/m'"),
    (404, "application/json", '{"detail": "Not Found"}', "not_openai", "has no such route"),
    (400, "application/json", '{"message": "max_tokens is too large for the context"}',
     "request", "refused the request (HTTP 400): max_tokens is too large"),
])
def test_status_bodies_of_real_servers_are_named(status: int, content_type: str, body: str,
                                                 kind: str, words: str) -> None:
    """Bodies as Ollama, transformers serve, FastAPI and proxies send them."""
    request = httpx2.Request("POST", "http://host:1/v1/chat/completions")
    response = httpx2.Response(status, headers={"content-type": content_type}, text=body,
                               request=request)
    exc = openai.APIStatusError(f"Error code: {status}", response=response, body=response.json()
                                if "json" in content_type else None)
    error = status_error(exc, base_url="http://host:1/v1", model="qwen3:8b")
    assert error.kind == kind and words in error.message
    assert "start one" not in error.fix


def test_an_event_stream_with_no_events_is_named_not_called_a_cut(replay_server: Start) -> None:
    error = failure(replay_server(quirk="ndjson_as_sse", quirk_requests=(1,)))
    assert error.kind == "not_openai" and "cut after" not in error.message
    assert "no server-sent events (no `data:` lines)" in error.message


def test_a_dropped_connection_gets_one_fresh_try_even_with_no_retries(
        replay_server: Start) -> None:
    """uvicorn closes a kept-alive connection after an HTTP 500: the next request must not fail."""
    server = replay_server(quirk="drop", quirk_requests=(1,))
    (done,) = client_for(server, model=server.model, retries=0).stream_chat(MESSAGES)
    assert done.content and len(server.requests) == 2


def test_a_server_that_always_drops_the_connection_is_not_called_absent(
        replay_server: Start) -> None:
    server = replay_server(quirk="drop", quirk_requests=(1, 2))
    error = failure(server, model=server.model, retries=0)
    assert error.kind == "server" and "dropped the connection" in error.message
    assert "start one" not in error.fix and "log" in error.fix
