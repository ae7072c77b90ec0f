"""Candidate code at build time runs under the guard: in the build-only child as in the worker,
it may write only into its own keyed build dir, so no candidate can plant files in another's
cached build (which the next evaluation of that candidate would load as is)."""

from __future__ import annotations

from pathlib import Path

from evaluator_cases import DIAG_FAST, DIAG_PROBLEM, job

from cudal1_evaluator.launch import build, evaluate


def planting(target: Path) -> str:
    """A candidate whose import writes into a sibling build dir, then is an honest rewrite."""
    return f"open({str(target)!r}, 'w').write('tampered')\n" + DIAG_FAST


def test_the_build_child_refuses_writes_into_another_build(tmp_path: Path) -> None:
    victim = tmp_path / "0123456789abcdef0123456789abcdef"
    victim.mkdir()
    target = victim / "planted.py"
    outcome = build(job(DIAG_PROBLEM, planting(target), tmp_path))
    assert not outcome.ok and outcome.status == "runtime_error", outcome.message
    assert "blocked by the evaluator" in outcome.message
    assert not target.exists()


def test_the_worker_refuses_writes_into_another_build(tmp_path: Path) -> None:
    victim = tmp_path / "fedcba9876543210fedcba9876543210"
    victim.mkdir()
    target = victim / "planted.py"
    result = evaluate(job(DIAG_PROBLEM, planting(target), tmp_path, strict_threshold=1e9))
    assert result.status == "rejected" and result.reward == 0.0, result.message
    assert "write" in result.message
    assert not target.exists()


def test_the_build_child_refuses_processes_at_import(tmp_path: Path) -> None:
    spawning = "import subprocess\nsubprocess.run(['true'])\n" + DIAG_FAST
    outcome = build(job(DIAG_PROBLEM, spawning, tmp_path))
    assert outcome.status == "runtime_error" and "blocked by the evaluator" in outcome.message


def test_an_honest_candidate_still_builds(tmp_path: Path) -> None:
    outcome = build(job(DIAG_PROBLEM, DIAG_FAST, tmp_path))
    assert outcome.ok and outcome.status == "ok", outcome.message
