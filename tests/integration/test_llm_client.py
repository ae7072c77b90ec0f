"""The model client against the real replay server over HTTP (no mocks)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from cudal1_tui.config import Settings
from cudal1_tui.errors import ModelError
from cudal1_tui.llm import (
    Completion,
    ModelCancelled,
    ModelClient,
    StreamCut,
    ThinkSplitter,
    normalize_base_url,
)
from cudal1_tui.records import Message, SamplingSettings
from cudal1_tui.replay import ReplayServer, Reply

MESSAGES = [Message("system", "You optimize PyTorch."), Message("user", "Make diag_matmul fast.")]
Start = Callable[..., ReplayServer]
Replies = tuple[Reply, ...]
# A scripted hang lasts a minute (it ends early when the server stops), and a request that
# must end before it gets a third of that: the bound tells a prompt end from waiting the hang
# out, not from a loaded host's scheduling (a thread can wait seconds for a core on a busy
# 2-core CI box).
HANG_S = 60.0
PROMPT_S = 20.0


def client_for(server: ReplayServer | str, **settings: object) -> ModelClient:
    url = server if isinstance(server, str) else server.base_url
    return ModelClient(Settings(base_url=url, **settings), backoff_s=0.01)  # type: ignore[arg-type]


Chunk = tuple[int, str, str]


def collect(client: ModelClient, **kwargs: object) -> tuple[list[Completion], list[Chunk]]:
    chunks: list[Chunk] = []
    out = client.stream_chat(MESSAGES, on_chunk=lambda i, k, t: chunks.append((i, k, t)),
                             **kwargs)  # type: ignore[arg-type]
    return out, chunks


@pytest.mark.parametrize("style", ["reasoning", "reasoning_content", "think"])
def test_streams_reasoning_and_content_in_each_style(replay_server: Start, style: str,
                                                     replay_replies: Replies) -> None:
    server = replay_server(reasoning_style=style, chunk_chars=5)  # tags split across chunks
    (done,), chunks = collect(client_for(server))
    expected = replay_replies[0]
    assert done.reasoning == expected.reasoning
    assert done.content == expected.content
    assert done.finish_reason == "stop" and not done.truncated
    assert done.model == server.model
    kinds = [k for _, k, _ in chunks]
    assert kinds.index("content") > kinds.index("reasoning")  # reasoning streamed first
    assert "".join(t for _, k, t in chunks if k == "reasoning").strip() == expected.reasoning
    assert all("<think>" not in t and "</think>" not in t for _, _, t in chunks)


def test_usage_and_speed_are_reported(replay_server: Start) -> None:
    server = replay_server(latency_s=0.002)
    (done,), _ = collect(client_for(server))
    assert done.usage.prompt_tokens > 0 and done.usage.completion_tokens > 0
    assert not done.usage.estimated  # the server sent a usage chunk
    assert done.elapsed_s > 0 and done.tokens_per_s > 0
    assert done.first_token_s is not None and done.first_token_s <= done.elapsed_s


def test_two_choices_through_the_api_n(replay_server: Start, replay_replies: Replies) -> None:
    server = replay_server(chunk_chars=7)
    out, chunks = collect(client_for(server), n=2)
    assert [c.index for c in out] == [0, 1]
    assert [c.content for c in out] == [r.content for r in replay_replies]
    assert {i for i, _, _ in chunks} == {0, 1}
    assert [(r.n, r.status) for r in server.requests] == [(2, 200)]


def test_n_rejected_falls_back_to_concurrent_single_requests(replay_server: Start,
                                                             replay_replies: Replies) -> None:
    server = replay_server(reject_n=True)
    client = client_for(server)
    out, _ = collect(client, n=2)
    assert sorted(c.content for c in out) == sorted(r.content for r in replay_replies)
    first = server.requests[0]
    assert (first.n, first.status) == (2, 400)
    assert sorted(r.n for r in server.requests[1:]) == [1, 1]
    collect(client, n=2)  # remembered: no second n=2 attempt
    assert [r.n for r in server.requests[3:]] == [1, 1]


def test_n_ignored_asks_for_the_missing_choices(replay_server: Start,
                                                replay_replies: Replies) -> None:
    server = replay_server(ignore_n=True)
    out, chunks = collect(client_for(server), n=3)
    assert [c.index for c in out] == [0, 1, 2]
    assert all(c.finish_reason == "stop" and c.content for c in out)
    assert {i for i, _, _ in chunks} == {0, 1, 2}
    assert sorted(r.n for r in server.requests) == [1, 1, 3]


def test_model_is_picked_from_the_server(replay_server: Start) -> None:
    server = replay_server(model="qwen-kernel-7b")
    client = client_for(server)
    assert client.list_models() == ["qwen-kernel-7b"]
    assert client.resolve_model() == "qwen-kernel-7b"
    assert client_for(server, model="qwen-kernel-7b").resolve_model() == "qwen-kernel-7b"


def test_unknown_model_names_the_served_ones(replay_server: Start) -> None:
    server = replay_server()
    with pytest.raises(ModelError) as info:
        client_for(server, model="gpt-9").stream_chat(MESSAGES)
    assert "gpt-9" in info.value.message and server.model in info.value.message
    assert info.value.fix == f"pick a model the server lists: {server.model} (--model)"


def test_server_down_says_what_to_do(closed_port_url: str) -> None:
    started = time.monotonic()
    with pytest.raises(ModelError) as info:
        client_for(closed_port_url).stream_chat(MESSAGES)
    assert time.monotonic() - started < 5
    assert info.value.message == f"no model server at {closed_port_url} (connection refused)"
    assert info.value.fix.startswith("start one (vLLM: `vllm serve MODEL`")
    assert "OPENAI_BASE_URL" in info.value.fix


def test_a_500_is_retried_then_succeeds(replay_server: Start, replay_replies: Replies) -> None:
    server = replay_server(fail_requests=(1,))
    (done,), _ = collect(client_for(server, retries=2))
    assert done.content == replay_replies[0].content
    assert [r.status for r in server.requests] == [500, 200]


def test_500_always_fails_after_the_retries(replay_server: Start) -> None:
    server = replay_server(fail_rate=1.0)
    with pytest.raises(ModelError) as info:
        client_for(server, retries=2).stream_chat(MESSAGES)
    assert "HTTP 500" in info.value.message and "after 3 attempts" in info.value.message
    assert "injected failure" in info.value.message  # the server's own message is shown
    assert len(server.requests) == 3


def test_a_4xx_shows_the_server_message(replay_server: Start) -> None:
    server = replay_server()
    sampling = SamplingSettings(max_tokens=0)  # the server refuses max_tokens < 1
    with pytest.raises(ModelError) as info:
        client_for(server).stream_chat(MESSAGES, sampling=sampling)
    assert "HTTP 400" in info.value.message and "max_tokens" in info.value.message
    assert len(server.requests) == 1  # 4xx are not retried


def test_a_cut_stream_keeps_the_partial_text(replay_server: Start, replay_replies: Replies) -> None:
    server = replay_server(cut_requests=(1,), chunk_chars=8)
    with pytest.raises(StreamCut) as info:
        client_for(server).stream_chat(MESSAGES)
    cut = info.value
    assert cut.chars > 0 and f"cut after {cut.chars} chars" in cut.message
    partial = cut.partial[0]
    assert partial.finish_reason == ""
    full = replay_replies[0].reasoning + replay_replies[0].content
    assert 0 < len(partial.reasoning) + len(partial.content) < len(full)


def test_a_silent_stream_times_out_as_a_cut(replay_server: Start) -> None:
    # a minute-long hang: the 0.3 s read timeout, not the hang's end, must end the request;
    # the bound leaves a loaded host its scheduling delays (the hang stops with the server)
    server = replay_server(hang_requests=(1,), hang_s=HANG_S)
    started = time.monotonic()
    with pytest.raises(StreamCut) as info:
        client_for(server, request_timeout_s=0.3).stream_chat(MESSAGES)
    assert time.monotonic() - started < PROMPT_S
    assert "no data for 0.3 s" in info.value.message


def test_length_limit_is_a_flag_not_an_error(replay_server: Start, replay_replies: Replies) -> None:
    server = replay_server(length_requests=(1,))
    (done,), _ = collect(client_for(server))
    assert done.truncated and done.finish_reason == "length"
    assert len(done.reasoning) + len(done.content) < len(replay_replies[0].content)


def test_max_tokens_truncates_with_length(replay_server: Start) -> None:
    server = replay_server(reasoning_style="none")
    (done,), _ = collect(client_for(server), sampling=SamplingSettings(max_tokens=10))
    assert done.truncated and len(done.content) == 40


def test_cancel_mid_stream_returns_promptly(replay_server: Start) -> None:
    server = replay_server(latency_s=0.01, hang_requests=(1,), hang_s=HANG_S)
    cancel = threading.Event()
    seen: list[str] = []

    def on_chunk(index: int, kind: str, text: str) -> None:
        seen.append(text)
        cancel.set()

    started = time.monotonic()
    with pytest.raises(ModelCancelled) as info:
        client_for(server).stream_chat(MESSAGES, on_chunk=on_chunk, cancel=cancel)
    assert time.monotonic() - started < PROMPT_S  # not the hang's minute
    assert seen and info.value.partial[0].reasoning.startswith(seen[0])


def test_cancel_from_another_thread_during_a_hang(replay_server: Start) -> None:
    server = replay_server(hang_requests=(1,), hang_s=HANG_S)
    cancel = threading.Event()
    timer = threading.Timer(0.3, cancel.set)
    timer.start()
    started = time.monotonic()
    with pytest.raises(ModelCancelled):
        client_for(server).stream_chat(MESSAGES, cancel=cancel)
    assert time.monotonic() - started < PROMPT_S  # not the hang's minute
    timer.cancel()


def test_think_splitter_handles_tags_split_anywhere() -> None:
    text = "<think>\nweigh options\n</think>\n\nanswer <b>bold</b> done"
    for size in (1, 2, 3, 7):
        splitter = ThinkSplitter()
        parts = [p for i in range(0, len(text), size) for p in splitter.feed(text[i:i + size])]
        parts += splitter.flush()
        reasoning = "".join(t for k, t in parts if k == "reasoning")
        content = "".join(t for k, t in parts if k == "content")
        assert reasoning == "\nweigh options\n"
        assert content == "\n\nanswer <b>bold</b> done"


def test_base_url_is_normalized_and_checked() -> None:
    assert normalize_base_url("http://localhost:8000") == "http://localhost:8000/v1"
    assert normalize_base_url("http://h:11434/v1/") == "http://h:11434/v1"
    with pytest.raises(ModelError):
        normalize_base_url("localhost:8000")


def test_cancel_and_close_end_the_request_on_the_server(replay_server: Start) -> None:
    """Cancelling closes the connection: the server sees its client leave (and stops)."""
    server = replay_server(latency_s=0.05, chunk_chars=4)
    cancel = threading.Event()
    with pytest.raises(ModelCancelled):
        client_for(server).stream_chat(MESSAGES, on_chunk=lambda *_: cancel.set(), cancel=cancel)
    deadline = time.monotonic() + 3
    while not server.client_left and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.client_left == [1]
    client = client_for(server)
    threading.Timer(0.3, client.close).start()  # the app exits mid-stream
    with pytest.raises(ModelError):
        client.stream_chat(MESSAGES)
    while len(server.client_left) < 2 and time.monotonic() < deadline + 3:
        time.sleep(0.02)
    assert server.client_left == [1, 2]
