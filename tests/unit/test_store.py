"""The session store: layout, decisions and git line, resolving ids, listing, rescoring."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from cudal1_evaluator.schema import Result, TimingSummary
from cudal1_tui.config import Settings
from cudal1_tui.errors import SessionError
from cudal1_tui.records import CandidateRecord
from cudal1_tui.store import Session, SessionMeta, list_sessions, new_record_id, resolve_session
from cudal1_tui.store.rescoring import parse_params, read_rescored, rescore, write_rescored

REFERENCE = "import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n" \
    "        return x * 2\n\ndef get_inputs():\n    return [torch.ones(4)]\n\n" \
    "def get_init_inputs():\n    return []\n"


@pytest.fixture(autouse=True)
def no_global_git_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """CI machines have no git identity: the store must not need one."""
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "no-gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for var in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"):
        monkeypatch.delenv(var, raising=False)


def record(session: Session, round_: int, slot: int, *, ref_ms: float = 2.0,
           cand_ms: float = 1.0, status: str = "ok") -> CandidateRecord:
    ok = status == "ok"
    speedup = ref_ms / cand_ms if ok else None
    result = Result(status=status, correct=ok, speedup=speedup,  # type: ignore[arg-type]
                    timing={"reference": TimingSummary(median_ms=ref_ms, n=20),
                            "candidate": TimingSummary(median_ms=cand_ms, n=20)})
    code = f"import torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n" \
        f"        return x + x  # round {round_} slot {slot}\n"
    return CandidateRecord(
        record_id=new_record_id(round_, slot), session_id=session.id, round=round_, slot=slot,
        source="model", problem_name="double", code=code, result=result,
        reward=max(0.0, (speedup or 0) - 1), reward_formula="clipped_speedup", status=status,
        speedup=speedup)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "sessions"


@pytest.fixture
def session(tmp_path: Path, root: Path) -> Session:
    problem = tmp_path / "double.py"
    problem.write_text(REFERENCE)
    meta = SessionMeta(model="m1", device={"name": "cpu"}, versions={"torch": "2.13"})
    return Session.create(problem, REFERENCE, Settings(api_key="sk-very-secret"), meta, root=root)


def test_create_lays_out_the_directory(session: Session) -> None:
    path = session.path
    assert re.fullmatch(r"\d{4}-\d\d-\d\d_\d{4}_double_[0-9a-f]{6}", path.name)
    assert session.id == path.name
    meta = json.loads((path / "session.json").read_text())
    assert meta["problem_name"] == "double" and meta["problem_source"] == REFERENCE
    assert meta["model"] == "m1" and meta["schema_version"] == 1 and meta["created_at"]
    assert "api_key" not in meta["settings"] and meta["settings"]["temperature"] == 0.7
    assert "sk-very-secret" not in (path / "session.json").read_text()
    assert (path / "problem.py").read_text() == REFERENCE
    assert (path / "trace.jsonl").read_text() == ""
    assert (path / "candidates").is_dir()
    [first] = session.history_log()
    assert first.action == "reference" and session.history.module_source() == REFERENCE
    session.close()


def test_candidates_decisions_and_the_accepted_line(session: Session) -> None:
    a, b, bad = record(session, 1, 0, cand_ms=1.0), record(session, 1, 1, cand_ms=0.5), \
        record(session, 2, 0, status="incorrect")
    for rec in (a, b, bad):
        assert session.append_candidate(rec)
    assert not session.append_candidate(a)
    assert (session.path / "candidates" / f"r001_s0_{a.record_id}.py").read_text() == a.code
    assert session.next_round() == 3
    assert session.best() is not None and session.best().record_id == b.record_id  # type: ignore[union-attr]
    assert session.accepted() is None

    sha_a = session.accept(a.record_id)
    sha_b = session.record_decision(b.record_id, "accepted")
    assert session.accepted().record_id == b.record_id  # type: ignore[union-attr]
    assert session.history.module_source() == b.code
    assert session.accept(b.record_id) == sha_b  # accepting the live one again is a no-op
    with pytest.raises(SessionError, match="did not pass verification"):
        session.accept(bad.record_id)
    with pytest.raises(SessionError, match="is the accepted candidate"):
        session.reject(b.record_id)
    session.reject(bad.record_id)

    assert session.undo() not in (None, sha_a, sha_b)
    assert session.accepted().record_id == a.record_id  # type: ignore[union-attr]
    assert session.history.module_source() == a.code
    assert session.record_decision(a.record_id, "undone")
    assert session.history.module_source() == REFERENCE
    assert session.undo() is None
    decisions = {r.record_id: r.decision for r in session.records()}
    assert decisions == {a.record_id: "undone", b.record_id: "undone",
                         bad.record_id: "rejected"}
    with pytest.raises(SessionError, match="no candidate"):
        session.accept("nope")
    session.close()


def test_reopen_by_id_prefix_tail_or_path(session: Session, root: Path) -> None:
    session.append_candidate(record(session, 1, 0))
    session.close()
    tail = session.id.rsplit("_", 1)[1]
    for ref in (session.id, session.id[:12], tail[:4], str(session.path)):
        with Session.open(ref, root, readonly=True) as again:
            assert again.id == session.id and len(again.records()) == 1
    with pytest.raises(SessionError, match="no session 'zzz'"):
        resolve_session("zzz", root)


def test_ambiguous_prefix_names_the_matches(tmp_path: Path, root: Path) -> None:
    for _ in range(2):
        Session.create(tmp_path / "double.py", REFERENCE, Settings(), root=root).close()
    with pytest.raises(SessionError, match="matches 2 sessions"):
        resolve_session("20", root)


def test_one_writer_many_readers(session: Session, root: Path) -> None:
    with pytest.raises(SessionError, match="in use"):
        Session.open(session.id, root)
    with Session.open(session.id, root, readonly=True) as reader, \
            pytest.raises(SessionError, match="read-only"):
        reader.append_candidate(record(reader, 1, 0))
    session.close()
    Session.open(session.id, root).close()  # free once the writer closed


def test_a_commit_without_its_trace_row_is_reconciled(session: Session, root: Path) -> None:
    rec = record(session, 1, 0)
    session.append_candidate(rec)
    # what a kill between the git commit and the trace row leaves behind
    sha = session.history.commit_accept(rec.code, "Accept", "", rec.record_id)
    session.close()
    with Session.open(session.id, root) as again:
        assert again.record(rec.record_id).decision == "accepted"
        assert [d.commit for d in again.decisions()] == [sha]


def test_update_meta_rewrites_session_json(session: Session, root: Path) -> None:
    session.update_meta(device={"name": "NVIDIA H200"}, versions={"torch": "2.13", "cuda": "13"})
    with pytest.raises(SessionError, match="unknown session fields"):
        session.update_meta(colour="red")
    session.close()
    with Session.open(session.id, root, readonly=True) as again:
        assert again.meta.device == {"name": "NVIDIA H200"}


def test_list_sessions_newest_first_with_speedups(tmp_path: Path, root: Path) -> None:
    older = Session.create(tmp_path / "double.py", REFERENCE, Settings(), root=root,
                           meta=SessionMeta(created_at="2026-01-01T00:00:00+00:00"))
    older.close()
    newer = Session.create(tmp_path / "double.py", REFERENCE, Settings(model="m2"), root=root)
    a, b = record(newer, 1, 0, cand_ms=1.0), record(newer, 1, 1, cand_ms=0.4)
    newer.append_candidate(a)
    newer.append_candidate(b)
    newer.accept(a.record_id)
    newer.close()
    (root / "not-a-session").mkdir()
    summaries = list_sessions(root)
    assert [s.session_id for s in summaries] == [newer.id, older.id]
    top = summaries[0]
    assert (top.candidates, top.best_speedup, top.accepted_speedup, top.model) == (2, 5.0, 2.0,
                                                                                   "m2")
    assert summaries[1].best_speedup is None and summaries[1].accepted_speedup is None
    assert list_sessions(tmp_path / "absent") == []


def test_rescore_uses_the_raw_timings_and_leaves_the_trace_alone(session: Session) -> None:
    recs = [record(session, 1, 0, ref_ms=3.0, cand_ms=1.0), record(session, 1, 1, status="timeout")]
    for rec in recs:
        session.append_candidate(rec)
    before = (session.path / "trace.jsonl").read_bytes()
    rows = rescore(session.records(), "speedup", parse_params(["max=2.5"]))
    assert [(r.speedup, r.reward, r.old_reward) for r in rows] == [(3.0, 2.5, 2.0),
                                                                    (None, 0.0, 0.0)]
    out = session.path / "rescored-speedup.jsonl"
    write_rescored(out, rows)
    assert read_rescored(out) == {recs[0].record_id: 2.5, recs[1].record_id: 0.0}
    assert json.loads(out.read_text().splitlines()[0])["params"] == {"max": 2.5}
    assert (session.path / "trace.jsonl").read_bytes() == before
    with pytest.raises(SessionError, match="unknown reward formula"):
        rescore(session.records(), "fastest", {})
    with pytest.raises(SessionError, match="KEY=NUMBER"):
        parse_params(["max"])
    session.close()


def test_workers_on_several_threads_record_safely(session: Session, root: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    recs = [record(session, 1 + i // 4, i % 4, cand_ms=0.5 + i / 10) for i in range(24)]
    with ThreadPoolExecutor(max_workers=6) as pool:
        added = list(pool.map(session.append_candidate, recs))
        shas = list(pool.map(session.accept, [r.record_id for r in recs[:6]]))
    assert all(added) and len(set(shas)) == 6
    session.close()
    with Session.open(session.id, root, readonly=True) as again:
        assert again.warnings == []
        assert sorted(r.record_id for r in again.records()) == sorted(r.record_id for r in recs)
        assert len(again.history_log()) == 7


def test_without_git_creation_fails_cleanly(tmp_path: Path, root: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    with pytest.raises(SessionError, match="cannot create a git repository") as err:
        Session.create(tmp_path / "double.py", REFERENCE, Settings(), root=root)
    assert "install git" in err.value.fix
    assert list(root.iterdir()) == []  # nothing half-made left behind


def test_a_copied_session_without_git_opens_read_only(session: Session, tmp_path: Path) -> None:
    a, b = record(session, 1, 0, cand_ms=1.0), record(session, 1, 1, cand_ms=0.5)
    for rec in (a, b):
        session.append_candidate(rec)
    session.accept(a.record_id)
    session.accept(b.record_id)
    session.undo()
    session.close()
    copies = tmp_path / "copies"
    copy = copies / "copied"
    shutil.copytree(session.path, copy, ignore=shutil.ignore_patterns(".git"))

    with Session.open(copy, readonly=True) as again:
        assert not again.history.has_git and again.history_log() == []
        assert again.notes == ["no git history (a recorded or copied session)"]
        assert again.accepted().record_id == a.record_id  # type: ignore[union-attr]
        assert {r.record_id: r.decision for r in again.records()} == {
            a.record_id: "accepted", b.record_id: "undone"}
        with pytest.raises(SessionError, match="read-only"):
            again.accept(b.record_id)
    with pytest.raises(SessionError, match="has no git history"):
        Session.open(copy)  # writable opens still need the repository
    [summary] = list_sessions(copies)
    assert (summary.accepted_record, summary.accepted_speedup) == (a.record_id, 2.0)
    with Session.open(session.path, readonly=True) as original:
        assert original.notes == [] and original.history.has_git


def test_the_users_git_hooks_do_not_run_in_a_session(tmp_path: Path, root: Path) -> None:
    """A session's commits are the app's records, not the user's work: a global hooks path
    or an init template whose hooks refuse every commit (a linter, a signing policy) must
    not break creating a session or accepting a candidate, nor run at all."""
    ran = tmp_path / "hooks-ran"
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    for name in ("pre-commit", "commit-msg", "post-commit", "prepare-commit-msg"):
        hook = hooks / name
        hook.write_text(f"#!/bin/sh\necho {name} >> {ran}\nexit 1\n")
        hook.chmod(0o755)
    template = tmp_path / "template"
    shutil.copytree(hooks, template / "hooks")
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / ".gitconfig").write_text(
        f"[core]\n\thooksPath = {hooks}\n[init]\n\ttemplateDir = {template}\n")
    problem = tmp_path / "double.py"
    problem.write_text(REFERENCE)
    session = Session.create(problem, REFERENCE, Settings(), root=root)
    rec = record(session, 1, 0)
    session.append_candidate(rec)
    session.accept(rec.record_id)
    assert [e.action for e in session.history_log()] == ["accept", "reference"]
    session.close()
    assert not ran.exists(), ran.read_text()
