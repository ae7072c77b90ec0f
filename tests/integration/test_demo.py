"""The committed demo session: a trace-only folder that `show`, `sessions`, `export` and
`serve-replay` all read (it has no git repository: a nested repo cannot be committed)."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "sessions" / "demo"
NOTE = "no git history (a recorded or copied session)"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "cudal1_tui", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=120, env=env)


def rows(kind: str) -> list[dict[str, Any]]:
    lines = (DEMO / "trace.jsonl").read_text(encoding="utf-8").splitlines()
    return [r for r in map(json.loads, filter(str.strip, lines)) if r.get("kind") == kind]


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "cudal1_tui", "serve-replay", str(DEMO), "--port", "0",
         "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("serving at http://127.0.0.1:"), line
        yield line.split()[2]
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def model_rows() -> list[dict[str, Any]]:
    return [r for r in rows("candidate") if r["source"] == "model"]


def post_chat(base_url: str, text: str) -> dict[str, Any]:
    url = urlsplit(base_url)
    conn = http.client.HTTPConnection(url.hostname or "", url.port, timeout=10)
    body = {"model": model_rows()[0]["model"], "stream": False,
            "messages": [{"role": "user", "content": text}]}
    conn.request("POST", f"{url.path}/chat/completions", json.dumps(body),
                 {"Content-Type": "application/json"})
    response = conn.getresponse()
    assert response.status == 200
    data: dict[str, Any] = json.loads(response.read())
    return data


def test_the_demo_is_a_real_recorded_session() -> None:
    candidates = rows("candidate")
    sources = {r["source"] for r in candidates}
    assert "model" in sources and any(s.startswith("builtin") for s in sources)
    assert any(r["status"] == "ok" and r["speedup"] for r in candidates)
    assert all(r["result"].get("timing") for r in candidates if r["status"] == "ok")
    assert not (DEMO / ".git").exists()
    meta = json.loads((DEMO / "session.json").read_text(encoding="utf-8"))
    assert meta["problem_path"] == "examples/diag_matmul.py" and meta["device"]["type"] == "cpu"
    for r in candidates:
        files = list((DEMO / "candidates").glob(f"*_{r['record_id']}.py"))
        assert [f.read_text(encoding="utf-8") for f in files] == [r["code"]]


def test_serve_replay_serves_the_model_replies_only(server: str) -> None:
    replies = [r["raw_response"] for r in model_rows()]
    served = [post_chat(server, "optimize diag_matmul")["choices"][0]["message"]["content"]
              for _ in replies]
    assert served == replies  # in trace order; built-in rows are skipped


def test_show_prints_the_candidates_table() -> None:
    proc = cli("show", str(DEMO))
    assert proc.returncode == 0, proc.stderr
    assert NOTE in proc.stdout and "Traceback" not in proc.stderr
    for r in rows("candidate"):
        assert r["record_id"] in proc.stdout
    accepted = [d["record_id"] for d in rows("decision") if d["decision"] == "accepted"]
    if accepted:
        assert f"(from the trace): {accepted[-1]}" in proc.stdout


def test_show_json_sessions_and_export_work_without_git(tmp_path: Path) -> None:
    shown = cli("show", str(DEMO), "--json")
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert data["history"] == [] and data["notes"] == [NOTE]
    assert len(data["candidates"]) == len(rows("candidate"))
    listed = cli("sessions", "--sessions-dir", str(DEMO.parent), "--json")
    assert listed.returncode == 0, listed.stderr
    assert "demo" in listed.stdout
    out = tmp_path / "demo.jsonl"
    exported = cli("export", str(DEMO), "--format", "jsonl", "-o", str(out))
    assert exported.returncode == 0, exported.stderr
    assert len(out.read_text(encoding="utf-8").splitlines()) == len(rows("candidate"))
    accepted = [d["record_id"] for d in rows("decision") if d["decision"] == "accepted"]
    module = tmp_path / "fast_diag.py"
    exported = cli("export", str(DEMO), "--format", "module", "-o", str(module))
    assert exported.returncode == 0, exported.stderr
    if accepted:  # the module is the accepted candidate's code
        [code] = [r["code"] for r in rows("candidate") if r["record_id"] == accepted[-1]]
        assert code.strip().splitlines()[-1] in module.read_text(encoding="utf-8")
