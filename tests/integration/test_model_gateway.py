"""The engine's side of the model client: availability words and waits said out loud."""

from __future__ import annotations

import threading
from collections.abc import Callable

from cudal1_tui.config import Settings
from cudal1_tui.engine.generate import ModelGateway
from cudal1_tui.records import Message, SamplingSettings
from cudal1_tui.replay import ReplayServer

Start = Callable[..., ReplayServer]


def test_no_server_under_no_builtin_does_not_promise_the_builtin(closed_port_url: str) -> None:
    with_builtin = ModelGateway(Settings(base_url=closed_port_url)).check()
    assert not with_builtin.ok and "running the built-in proposer only" in with_builtin.message
    alone = ModelGateway(Settings(base_url=closed_port_url, use_builtin=False)).check()
    assert not alone.ok and "built-in" not in alone.message.replace("--no-builtin", "")
    assert "no candidates can be proposed (--no-builtin)" in alone.message
    assert alone.fix.startswith("start one")


def test_a_wrong_key_is_not_told_to_start_a_server(replay_server: Start) -> None:
    server = replay_server(api_key="sk-right")
    availability = ModelGateway(Settings(base_url=server.base_url, api_key="nope")).check()
    assert not availability.ok and "rejected the API key" in availability.message
    assert "start" not in availability.fix


def test_a_rate_limit_wait_reaches_the_engine_and_tok_s_counts_from_the_first_token(
        replay_server: Start) -> None:
    server = replay_server(quirk="rate_limit", quirk_requests=(1,), retry_after="0.5")
    gateway = ModelGateway(Settings(base_url=server.base_url))
    assert gateway.check().ok
    notices: list[str] = []
    rates: list[float] = []
    counts: list[int] = []

    def sink(_slot: int, _kind: str, _text: str, tokens: int, rate: float) -> None:
        counts.append(tokens)
        rates.append(rate)

    done = gateway.generate(0, [Message("user", "go")], SamplingSettings(max_tokens=200),
                            sink, threading.Event(), notices.append)
    gateway.close()
    assert done.content and len(notices) == 1 and "HTTP 429" in notices[0]
    assert "waiting 0.5 s as its Retry-After asks" in notices[0]
    # The 0.5 s spent waiting is not generation: the live rate is not dragged down by it.
    assert done.first_token_s is not None and done.first_token_s >= 0.5
    assert rates[0] == 0.0 and max(rates) > 0
    # The last count shown is the server's own usage, not the running estimate.
    assert not done.usage.estimated and counts[-1] == done.usage.completion_tokens
    assert rates[-1] == done.tokens_per_s
