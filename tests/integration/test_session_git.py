"""The accepted line in a real git repository, and the session commands end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from store_builders import CANDIDATE, REFERENCE, populated_session, record

from cudal1_tui.store import Session

NO_GIT_IDENTITY = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


@pytest.fixture(autouse=True)
def no_global_git_config(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in NO_GIT_IDENTITY.items():
        monkeypatch.setenv(key, value)


def git(path: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=path, check=True, capture_output=True, text=True,
                          env={**os.environ, **NO_GIT_IDENTITY}).stdout


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cudal1_tui", *args], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "COLUMNS": "200"})


def test_accepts_commit_and_undo_reverts_without_rewriting(tmp_path: Path) -> None:
    session, recs = populated_session(tmp_path / "sessions")
    path = session.path
    first_accept = git(path, "rev-parse", "HEAD").strip()
    subject, body = git(path, "log", "-1", "--format=%s%x00%b").split("\0")
    r1s0 = recs["r1s0"]
    assert subject == f"Accept {r1s0.record_id}: 2.00x (model, round 1 slot 0)"
    assert "## Performance Analysis" in body and "fuse into one GEMM" in body
    assert "median: reference 2 ms, candidate 1 ms" in body
    assert f"Cudal1-Record: {r1s0.record_id}" in body
    author = git(path, "log", "-1", "--format=%an <%ae>").strip()
    assert author == "cudal1-tui <cudal1-tui@localhost>"
    assert git(path, "ls-files").split() == [".gitignore", "model.py"]
    assert git(path, "status", "--porcelain") == ""  # trace, candidates etc. are ignored

    better = recs["r2s1"]
    session.accept(better.record_id)
    assert git(path, "show", "HEAD:model.py") == better.code
    undo_sha = session.undo()
    assert undo_sha == git(path, "rev-parse", "HEAD").strip()
    assert git(path, "show", "HEAD:model.py") == r1s0.code
    assert git(path, "log", "-1", "--format=%s").startswith('Revert "Accept ')
    # history only grows: every earlier commit is still an ancestor of HEAD
    subprocess.run(["git", "merge-base", "--is-ancestor", first_accept, "HEAD"], cwd=path,
                   check=True)
    assert git(path, "rev-list", "--count", "HEAD").strip() == "4"
    session.undo()
    assert git(path, "show", "HEAD:model.py") == REFERENCE
    assert session.undo() is None and session.accepted() is None
    assert [r.decision for r in session.records()][:2] == ["undone", "rejected"]
    session.close()


def test_resume_continues_the_rounds_and_the_line(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    session, _ = populated_session(root)
    session.close()
    with Session.open(session.id[:20], root) as resumed:
        assert resumed.next_round() == 3
        fresh = record(resumed, resumed.next_round(), 0, cand_ms=0.25,
                       code=CANDIDATE.replace("2.0", "2.00"))
        assert resumed.append_candidate(fresh)
        resumed.accept(fresh.record_id)
        assert resumed.accepted().record_id == fresh.record_id  # type: ignore[union-attr]
        assert resumed.best().speedup == 8.0  # type: ignore[union-attr]
    assert git(session.path, "rev-list", "--count", "HEAD").strip() == "3"
    assert sorted(p.name[:7] for p in (session.path / "candidates").iterdir()) == [
        "r001_s0", "r001_s1", "r001_s2", "r002_s0", "r002_s1", "r003_s0"]


def test_sessions_show_and_rescore_commands(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    session, recs = populated_session(root)
    session.close()
    listed = cli("sessions", "--json", "--sessions-dir", str(root))
    assert listed.returncode == 0, listed.stderr
    [summary] = json.loads(listed.stdout)
    assert (summary["session_id"], summary["candidates"], summary["best_speedup"],
            summary["accepted_speedup"]) == (session.id, 5, 4.0, 2.0)
    assert session.id in cli("sessions", "--sessions-dir", str(root)).stdout

    shown = json.loads(cli("show", session.id[-6:], "--json", "--sessions-dir", str(root)).stdout)
    assert shown["accepted"] == recs["r1s0"].record_id
    assert shown["best"] == recs["r2s1"].record_id
    rows = {row["record_id"]: row for row in shown["candidates"]}
    assert rows[recs["r1s1"].record_id]["flags"] == ["output_mismatch"]
    assert rows[recs["r1s1"].record_id]["decision"] == "rejected"
    assert [e["action"] for e in shown["history"]] == ["accept", "reference"]
    table = cli("show", str(session.path), "--sessions-dir", str(root)).stdout
    assert recs["r2s1"].record_id in table and "accepted line" in table

    rescored = cli("rescore", session.id, "--formula", "binary", "--param", "threshold=1.5",
                   "--sessions-dir", str(root))
    assert rescored.returncode == 0, rescored.stderr
    lines = (session.path / "rescored-binary.jsonl").read_text().splitlines()
    rewards = {json.loads(x)["record_id"]: json.loads(x)["reward"] for x in lines}
    assert rewards[recs["r1s2"].record_id] == 0.0 and rewards[recs["r1s0"].record_id] == 1.0

    missing = cli("show", "nope", "--sessions-dir", str(root))
    assert missing.returncode == 1 and "no session 'nope'" in missing.stderr
    assert "Traceback" not in missing.stderr
    bad = cli("rescore", session.id, "--formula", "fastest", "--sessions-dir", str(root))
    assert bad.returncode == 1 and "use one of: binary" in bad.stderr
