"""``doctor``'s model-server line against scripted servers over real HTTP: cause and fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from cudal1_tui.config import Settings
from cudal1_tui.llm.server_probe import probe_server
from cudal1_tui.replay import ReplayServer

Start = Callable[..., ReplayServer]
ROOT = Path(__file__).resolve().parents[2]


def probe(url: str, **settings: object) -> tuple[str, str, str]:
    fields: dict[str, object] = {"base_url": url, "headers_timeout_s": 2, **settings}
    report = probe_server(Settings(**fields))  # type: ignore[arg-type]
    return report.status, report.detail, report.fix


def test_a_listing_server_is_ok_with_its_models(replay_server: Start) -> None:
    server = replay_server(model="kernel-7b")
    assert probe(server.base_url) == ("ok", f"{server.base_url}: kernel-7b", "")


def test_nothing_listening_is_the_only_case_that_says_start_one(closed_port_url: str) -> None:
    status, detail, fix = probe(closed_port_url)
    assert status == "warn" and detail.startswith(f"no model server at {closed_port_url}")
    assert "built-in proposer still works" in detail
    assert fix.startswith("start one")
    _, detail, _ = probe(closed_port_url, use_builtin=False)
    assert "built-in" not in detail and "nothing can propose candidates" in detail


def test_a_rejected_key_is_named_not_unreachable(replay_server: Start) -> None:
    server = replay_server(api_key="sk-right")
    status, detail, fix = probe(server.base_url, api_key="sk-wrong")
    assert status == "missing" and "rejected the API key (HTTP 401)" in detail
    assert "unreachable" not in detail and "start" not in fix and "OPENAI_API_KEY" in fix


def test_an_html_page_asks_about_the_base_url(replay_server: Start) -> None:
    status, detail, fix = probe(replay_server(quirk="html").base_url)
    assert status == "missing" and "answered with an HTML page (HTTP 404)" in detail
    assert "<" not in detail and "base_url" in fix


def test_models_failing_but_chat_working_is_ok_and_says_both(replay_server: Start) -> None:
    server = replay_server(models_status=500)
    status, detail, _ = probe(server.base_url, model=server.model)
    assert status == "ok"
    assert detail == (f"{server.base_url}: /v1/models failed (HTTP 500: Internal Server Error); "
                      f"the chat call with {server.model!r} works")


def test_models_failing_with_no_model_named_says_to_name_one(replay_server: Start) -> None:
    status, detail, fix = probe(replay_server(models_status=500).base_url)
    assert status == "missing" and "HTTP 500" in detail and "--model" in fix


def test_a_wrong_model_lists_the_served_ones(replay_server: Start) -> None:
    server = replay_server()
    status, detail, fix = probe(server.base_url, model="typo")
    assert status == "missing" and "does not serve model 'typo'" in detail
    assert fix == f"pick a model the server lists: {server.model} (--model)"


def test_the_doctor_command_prints_the_diagnosis(replay_server: Start, tmp_path: Path) -> None:
    server = replay_server(api_key="sk-right")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUDAL1_", "OPENAI_"))}
    env.update(CUDAL1_CONFIG=str(tmp_path / "absent.toml"), PYTHONPATH=str(ROOT),
               OPENAI_API_KEY="sk-wrong")
    done = subprocess.run([sys.executable, "-m", "cudal1_tui", "doctor", "--json", "--base-url",
                           server.base_url], capture_output=True, text=True, env=env,
                          timeout=180, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    checks = {c["name"]: c for c in json.loads(done.stdout)}
    line = checks["model server"]
    assert line["status"] == "missing" and "rejected the API key" in line["detail"]
