"""The replay server on the wire (raw HTTP), its sources, faults and CLI."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from cudal1_tui.replay import (
    ReplayConfig,
    ReplayServer,
    ReplaySourceError,
    Reply,
    faults_for,
    load_replies,
)

Start = Callable[..., ReplayServer]
ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "sessions" / "demo"
USER = [{"role": "user", "content": "make diag_matmul faster"}]


def request(server: ReplayServer, method: str, path: str,
            body: Any = None) -> tuple[int, bytes]:
    url = urlsplit(server.base_url)
    conn = http.client.HTTPConnection(url.hostname or "", url.port, timeout=5)
    raw = body if isinstance(body, bytes) else (json.dumps(body).encode() if body else None)
    conn.request(method, path, body=raw, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    try:
        return response.status, response.read()
    finally:
        conn.close()


def chat(server: ReplayServer, **fields: Any) -> tuple[int, bytes]:
    body = {"model": server.model, "messages": USER, **fields}
    return request(server, "POST", "/v1/chat/completions", body)


def events(raw: bytes) -> list[Any]:
    """The SSE ``data:`` payloads, JSON-decoded except the final ``[DONE]``."""
    out: list[Any] = []
    for block in raw.decode().split("\n\n"):
        if block.startswith("data: "):
            data = block[len("data: "):]
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


def test_models_lists_the_advertised_model(replay_server: Start) -> None:
    server = replay_server(model="demo-model")
    status, raw = request(server, "GET", "/v1/models")
    assert status == 200
    body = json.loads(raw)
    assert body["object"] == "list"
    assert [(m["id"], m["object"]) for m in body["data"]] == [("demo-model", "model")]


@pytest.mark.parametrize("style,field", [("reasoning", "reasoning"),
                                         ("reasoning_content", "reasoning_content")])
def test_stream_is_openai_shaped(replay_server: Start, replay_replies: tuple[Reply, ...],
                                 style: str, field: str) -> None:
    server = replay_server(reasoning_style=style, chunk_chars=10)
    status, raw = chat(server, stream=True, stream_options={"include_usage": True})
    assert status == 200
    items = events(raw)
    assert items[-1] == "[DONE]"
    chunks = items[:-1]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert "".join(d.get(field, "") for d in deltas) == replay_replies[0].reasoning
    assert "".join(d.get("content", "") for d in deltas) == replay_replies[0].content
    finals = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert finals[-1] == "stop" and set(finals[:-1]) == {None}
    usage = chunks[-1]["usage"]
    assert chunks[-1]["choices"] == [] and usage["completion_tokens"] > 0
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def test_think_style_inlines_reasoning(replay_server: Start,
                                       replay_replies: tuple[Reply, ...]) -> None:
    server = replay_server(reasoning_style="think")
    _, raw = chat(server, stream=True)
    content = "".join(c["choices"][0]["delta"].get("content", "")
                      for c in events(raw)[:-1] if c["choices"])
    assert content.startswith("<think>\n" + replay_replies[0].reasoning + "\n</think>")
    assert "usage" not in events(raw)[-2]  # no usage chunk unless asked


def test_n_choices_are_indexed_and_each_finishes(replay_server: Start) -> None:
    server = replay_server()
    _, raw = chat(server, stream=True, n=3)
    chunks = events(raw)[:-1]
    finished = {c["choices"][0]["index"]: c["choices"][0]["finish_reason"]
                for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]}
    assert finished == {0: "stop", 1: "stop", 2: "stop"}


def test_non_streamed_completion(replay_server: Start, replay_replies: tuple[Reply, ...]) -> None:
    server = replay_server(reasoning_style="reasoning_content")
    status, raw = chat(server)
    body = json.loads(raw)
    assert status == 200 and body["object"] == "chat.completion"
    message = body["choices"][0]["message"]
    assert message["content"] == replay_replies[0].content
    assert message["reasoning_content"] == replay_replies[0].reasoning
    assert body["usage"]["completion_tokens"] > 0


def test_replies_cycle_in_order(replay_server: Start, replay_replies: tuple[Reply, ...]) -> None:
    server = replay_server()
    contents = [json.loads(chat(server)[1])["choices"][0]["message"]["content"] for _ in range(3)]
    assert contents == [replay_replies[0].content, replay_replies[1].content,
                        replay_replies[0].content]


@pytest.mark.parametrize("body,status,text", [
    (b"{not json", 400, "not JSON"),
    ({"messages": USER}, 400, "'model' is required"),
    ({"model": "M", "messages": []}, 400, "'messages'"),
    ({"model": "M", "messages": USER, "n": 0}, 400, "'n'"),
    ({"model": "other", "messages": USER}, 404, "does not exist"),
])
def test_bad_requests_get_openai_errors(replay_server: Start, body: Any, status: int,
                                        text: str) -> None:
    server = replay_server(model="M")
    got, raw = request(server, "POST", "/v1/chat/completions", body)
    error = json.loads(raw)["error"]
    assert got == status and error["code"] == status and text in error["message"]


def test_unknown_route_is_404(replay_server: Start) -> None:
    server = replay_server()
    assert request(server, "GET", "/v1/nothing")[0] == 404


def test_fail_schedule_hits_only_the_listed_request(replay_server: Start) -> None:
    server = replay_server(fail_requests=(2,))
    assert [chat(server)[0] for _ in range(3)] == [200, 500, 200]
    assert [r.status for r in server.requests] == [200, 500, 200]


def test_cut_stream_ends_without_done(replay_server: Start) -> None:
    server = replay_server(cut_requests=(1,), chunk_chars=4)
    with pytest.raises(http.client.IncompleteRead) as info:
        chat(server, stream=True)
    partial = info.value.partial.decode()
    assert "data: " in partial and "[DONE]" not in partial
    assert '"finish_reason": "stop"' not in partial


def test_max_tokens_truncates_with_finish_length(replay_server: Start) -> None:
    server = replay_server(reasoning_style="none")
    body = json.loads(chat(server, max_tokens=5)[1])
    choice = body["choices"][0]
    assert choice["finish_reason"] == "length" and len(choice["message"]["content"]) == 20


def test_fault_draws_are_deterministic_under_the_seed() -> None:
    config = ReplayConfig(replies=(Reply("x"),), fail_rate=0.3, cut_rate=0.3, seed=7)
    first = [faults_for(config, n) for n in range(1, 201)]
    assert first == [faults_for(config, n) for n in range(1, 201)]
    share = sum(f.fail for f in first) / len(first)
    assert 0.15 < share < 0.45
    other = ReplayConfig(replies=(Reply("x"),), fail_rate=0.3, cut_rate=0.3, seed=8)
    assert first != [faults_for(other, n) for n in range(1, 201)]


# -- sources -------------------------------------------------------------------------------


def test_demo_session_replays_its_model_rows(replay_server: Start) -> None:
    book = load_replies(DEMO)
    model_rows = [line for line in (DEMO / "trace.jsonl").read_text().splitlines()
                  if '"source": "model"' in line]
    assert len(book.replies) == len(model_rows) >= 3  # a recording: replies may repeat
    assert len({r.content for r in book.replies}) == 3
    assert all("## Code Implementation" in r.content and "class ModelNew" in r.content
               for r in book.replies)
    assert all(r.reasoning and r.key == "diag_matmul" for r in book.replies)
    server = replay_server(source=DEMO)
    assert server.model == "cudal1-replay"
    body = json.loads(chat(server)[1])
    assert body["choices"][0]["message"]["content"] == book.replies[0].content


def test_trace_skips_builtin_and_decision_rows(tmp_path: Path) -> None:
    rows = [
        {"kind": "candidate", "record_id": "a", "source": "builtin:compile", "raw_response": "",
         "problem_name": "p"},
        {"kind": "candidate", "record_id": "b", "source": "model", "raw_response": "reply b",
         "reasoning": "why b", "problem_name": "relu", "model": "qwen"},
        {"kind": "decision", "record_id": "b", "decision": "accepted"},
    ]
    trace = tmp_path / "trace.jsonl"
    trace.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    book = load_replies(trace)
    assert [(r.content, r.reasoning, r.key) for r in book.replies] == [("reply b", "why b",
                                                                        "relu")]
    assert book.model == "qwen"


def test_json_script_matches_replies_by_key(tmp_path: Path, replay_server: Start) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"model": "scripted", "replies": [
        {"content": "relu 1", "key": "relu"},
        {"content": "softmax 1", "key": "softmax_temperature"},
        {"content": "relu 2", "key": "relu", "finish_reason": "length"},
    ]}))
    server = replay_server(source=script)
    assert server.model == "scripted"

    def ask(text: str) -> dict[str, Any]:
        body = {"model": "scripted", "messages": [{"role": "user", "content": text}]}
        choice: dict[str, Any] = json.loads(
            request(server, "POST", "/v1/chat/completions", body)[1])["choices"][0]
        return choice

    assert ask("optimize relu.py")["message"]["content"] == "relu 1"
    assert ask("problem softmax_temperature")["message"]["content"] == "softmax 1"
    second = ask("relu again")
    assert (second["message"]["content"], second["finish_reason"]) == ("relu 2", "length")
    assert ask("something else")["message"]["content"] == "relu 1"  # all replies, cycling


def test_markdown_directory_with_keys_and_think(tmp_path: Path) -> None:
    (tmp_path / "01.md").write_text("<think>plan</think>\n\n## Code Implementation\nx")
    (tmp_path / "relu").mkdir()
    (tmp_path / "relu" / "a.md").write_text("relu reply")
    book = load_replies(tmp_path)
    assert [(r.content, r.reasoning, r.key) for r in book.replies] == [
        ("## Code Implementation\nx", "plan", ""), ("relu reply", "", "relu")]


@pytest.mark.parametrize("name,text,message", [
    ("missing.json", None, "no such file"),
    ("bad.json", "{", "not JSON"),
    ("empty.json", '{"replies": []}', "non-empty"),
    ("wrong.json", '[{"text": "x"}]', "string 'content'"),
    ("finish.json", '[{"content": "x", "finish_reason": "eos"}]', "finish_reason"),
    ("rows.jsonl", '{"kind": "candidate", "source": "builtin:x"}\n', "no model replies"),
    ("reply.txt", "hello", "expected trace.jsonl"),
])
def test_bad_sources_are_explained(tmp_path: Path, name: str, text: str | None,
                                   message: str) -> None:
    path = tmp_path / name
    if text is not None:
        path.write_text(text)
    with pytest.raises(ReplaySourceError) as info:
        load_replies(path)
    assert message in info.value.message and info.value.fix


# -- the command ------------------------------------------------------------------------------


def test_serve_replay_command_serves_until_interrupted() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "cudal1_tui", "serve-replay", str(DEMO), "--port", "0",
         "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("serving at http://127.0.0.1:"), line
        url = urlsplit(line.split()[2])
        conn = http.client.HTTPConnection(url.hostname or "", url.port, timeout=5)
        conn.request("GET", "/v1/models")
        assert json.loads(conn.getresponse().read())["data"][0]["id"] == "cudal1-replay"
        conn.close()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=10)
        assert proc.returncode == 0
        assert "OPENAI_BASE_URL=" in err and "Traceback" not in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_serve_replay_command_explains_a_bad_source(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "cudal1_tui", "serve-replay", str(tmp_path / "none.json"),
         "--port", "0"], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 1
    assert "no such file" in proc.stderr and "Traceback" not in proc.stderr
