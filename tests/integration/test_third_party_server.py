"""Our client and a whole headless round against a server we did not write: ``transformers serve``.

CPU only, no download (a tiny random model made at test time, see ``third_party``). Skipped,
with the reason, only when ``transformers[serving]`` is not installed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

for needed in ("transformers", "fastapi", "uvicorn"):
    pytest.importorskip(needed, reason=f"{needed} is not installed: pip install "
                                       "'transformers[serving]' (it is in the dev extra)")

from third_party import TransformersServer, make_tiny_model, offline_env  # noqa: E402

from cudal1_tui.config import Settings  # noqa: E402
from cudal1_tui.llm import ModelClient  # noqa: E402
from cudal1_tui.llm.server_probe import probe_server  # noqa: E402
from cudal1_tui.records import Message, SamplingSettings  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PROBLEM = ROOT / "examples" / "diag_matmul.py"
MAX_TOKENS = 16
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TransformersServer]:
    home = tmp_path_factory.mktemp("transformers-serve")
    env = offline_env(home)
    started = time.monotonic()
    model = make_tiny_model(home / "tiny-llama", env)
    made = time.monotonic()
    server = TransformersServer(model, env, home / "serve.log")
    try:
        server.wait_ready(timeout_s=90)
        print(f"\ntiny model made in {made - started:.1f} s; transformers serve ready in "
              f"{time.monotonic() - made:.1f} s")
        yield server
    finally:
        server.stop()


def test_the_client_streams_and_reports_the_servers_usage(served: TransformersServer) -> None:
    client = ModelClient(Settings(base_url=served.base_url, model=str(served.model)))
    started = time.monotonic()
    (done,) = client.stream_chat([Message("user", "w1 w2 w3")],
                                 sampling=SamplingSettings(max_tokens=MAX_TOKENS))
    print(f"a {MAX_TOKENS}-token reply in {time.monotonic() - started:.1f} s")
    assert done.content.strip()
    assert done.finish_reason in ("length", "stop")
    assert not done.usage.estimated  # the server's own counts
    assert 0 < done.usage.completion_tokens <= MAX_TOKENS and done.usage.prompt_tokens > 0
    assert done.first_token_s is not None and done.first_token_s <= done.elapsed_s
    # Some versions of transformers serve answer /v1/models with HTTP 500 for a model outside
    # the HF cache (5.24 lists it): the named model is used anyway, and why the list failed is
    # kept for doctor.
    if models_status(served) == 500:
        assert "HTTP 500" in client.models_problem
    else:
        assert client.models_problem == ""


def test_doctor_reports_the_list_and_the_chat_call(served: TransformersServer) -> None:
    report = probe_server(Settings(base_url=served.base_url, model=str(served.model)))
    assert report.status == "ok", report
    if models_status(served) == 500:
        assert "/v1/models failed (HTTP 500" in report.detail
        assert f"the chat call with {str(served.model)!r} works" in report.detail
    else:
        assert str(served.model) in report.detail and "failed" not in report.detail


def models_status(served: TransformersServer) -> int:
    """What this version of ``transformers serve`` answers to GET /v1/models."""
    try:
        with urllib.request.urlopen(f"{served.base_url}/models", timeout=30) as reply:
            return int(reply.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def test_a_wrong_model_name_shows_the_servers_own_words(served: TransformersServer) -> None:
    client = ModelClient(Settings(base_url=served.base_url, model="not-this-one"))
    with pytest.raises(Exception) as info:
        client.stream_chat([Message("user", "w1")], sampling=SamplingSettings(max_tokens=2))
    message = str(info.value)
    assert "does not serve model 'not-this-one'" in message and "pinned" in message
    assert "start one" not in message and "unreachable" not in message


def test_a_headless_round_records_the_nonsense_as_rejected(served: TransformersServer,
                                                           tmp_path: Path) -> None:
    env = offline_env(tmp_path)
    env.update(CUDAL1_CONFIG=str(tmp_path / "absent.toml"), CUDAL1_RETRIES="0",
               CUDAL1_MAX_TOKENS=str(MAX_TOKENS), CUDAL1_CANDIDATES_PER_ROUND="1",
               CUDAL1_BUILD_DIR=str(tmp_path / "build"), PYTHONPATH=str(ROOT))
    done = subprocess.run(  # this checkout's code, whatever the installed one is
        [sys.executable, "-m", "cudal1_tui", "run", str(PROBLEM), "--headless", "--rounds", "1",
         "--no-builtin", "--sizes", "cpu", "--device", "cpu",
         "--sessions-dir", str(tmp_path / "sessions"),
         "--base-url", served.base_url, "--model", str(served.model)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env, timeout=120,
        cwd=tmp_path)
    print(done.stderr[-3000:])
    assert "Traceback" not in done.stderr, done.stderr
    assert "unreachable" not in done.stderr
    (session,) = (tmp_path / "sessions").iterdir()
    rows = [json.loads(line) for line in (session / "trace.jsonl").read_text().splitlines()]
    (row,) = [r for r in rows if r.get("source") == "model"]
    assert row["status"] == "rejected" and row["raw_response"].strip()
    assert row["parse_error"]  # why the reply was refused, in the trace
    assert not row["usage"]["estimated"]  # the server's own token counts
    assert 0 < row["usage"]["completion_tokens"] <= MAX_TOKENS
    assert row["usage"]["prompt_tokens"] > 100  # the whole CUDA-L1 prompt was sent
    assert row["model"].startswith(str(served.model))
