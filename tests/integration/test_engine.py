"""The engine end to end on CPU: real evaluator subprocesses, a real HTTP model server
(the replay server), a real session directory with its git repository."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import git
import pytest
from engine_events import Events
from procs import descendants

from cudal1_evaluator.reward import noise_band, score
from cudal1_tui.config import Settings
from cudal1_tui.engine.engine import Engine
from cudal1_tui.engine.events import (
    CandidateFinished,
    EngineError,
    RoundFinished,
    RoundStarted,
    SessionOpened,
    StageChanged,
    StreamChunk,
)
from cudal1_tui.replay import ReplayConfig, ReplayServer, Reply
from cudal1_tui.store.session import Session

ROOT = Path(__file__).resolve().parents[2]
PROBLEM = ROOT / "examples" / "diag_matmul.py"

GOOD = textwrap.dedent('''\
    ## Performance Analysis
    The reference builds an n-by-n diagonal matrix and runs a dense GEMM: O(n^2 m) work.

    ## Algorithm Design
    Row i of the product is a[i] * B[i, :]: a broadcast multiply, one pass over B.

    ## Code Implementation
    ```python
    import torch
    import torch.nn as nn


    class ModelNew(nn.Module):
        def __init__(self):
            super().__init__()

        def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return a.unsqueeze(-1) * b
    ```
    ''')

BROKEN = textwrap.dedent('''\
    ## Performance Analysis
    Fuse everything.

    ## Algorithm Design
    A single expression.

    ## Code Implementation
    ```python
    import torch
    import torch.nn as nn


    class ModelNew(nn.Module):
        def __init__(self):
            super().__init__()

        def forward(self, a, b)
            return a[:, None] * b +
    ```
    ''')


TIMING_NOISE = {"reference_slowed", "timing_implausible"}


def flag_codes(record: Any) -> list[str]:
    return [f.code for f in record.result.flags]


def settings_for(tmp: Path, base_url: str, **changes: Any) -> Settings:
    values: dict[str, Any] = dict(
        base_url=base_url, sessions_dir=str(tmp / "sessions"), build_dir=str(tmp / "build"),
        device="cpu", correctness_trials=2, timing_budget_s=1.0, eval_timeout_s=120.0,
        strict_threshold=1e6,
        connect_timeout_s=2.0, request_timeout_s=60.0, retries=0, candidates_per_round=2,
        use_builtin=False, memory_limit_mb=4096,
    )
    values.update(changes)
    return Settings(**values)


@pytest.fixture
def replay() -> Iterator[ReplayServer]:
    with ReplayServer(ReplayConfig(replies=(Reply(GOOD), Reply(BROKEN)))) as server:
        yield server


def closed_port_url() -> str:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def _expected_reward(record: Any) -> float:
    """The record's reward recomputed from its own samples: on a loaded CPU an honest rewrite
    can land within the timing noise, which scores as 1x (reward 0), not as its speedup."""
    ref, cand = record.result.timing.get("reference"), record.result.timing.get("candidate")
    noise = noise_band(ref.samples_ms, cand.samples_ms) if ref and cand else 0.0
    return score(record.reward_formula, {}, record.status, record.speedup, noise=noise).reward


def test_model_session_records_prompts_and_decisions(tmp_path: Path,
                                                     replay: ReplayServer) -> None:
    events = Events()
    engine = Engine(PROBLEM, settings_for(tmp_path, replay.base_url), emit=events, sizes="cpu")
    engine.open()
    try:
        assert engine.model_available and engine.device == "cpu"
        assert engine.reference_ms is not None and engine.reference_ms > 0
        first, second = engine.run_rounds(2)
        records = engine.records()
    finally:
        engine.close()

    # Round 1: the good rewrite is verified and timed; the broken reply is a failed record
    # with the parse error. (On a shared, loaded CPU the evaluator may reject the timing
    # itself as implausible: the record then says so, and the engine is not at fault.)
    assert len(first.records) == 2
    ok = next(r for r in first.records if not r.parse_error)
    bad = next(r for r in first.records if r.parse_error)
    assert ok.result.correct is True, ok.result.message
    assert ok.status == "ok" or set(flag_codes(ok)) & TIMING_NOISE, ok.result.message
    assert ok.reward == _expected_reward(ok)
    assert bad.status == "rejected" and bad.result.status == "rejected"
    assert "does not parse" in bad.parse_error and bad.speedup is None and bad.reward == 0
    assert "Performance Analysis" in ok.raw_response
    assert ok.sections.performance_analysis.startswith("The reference builds")
    assert ok.model == replay.model and ok.sampling is not None
    assert ok.result.timing and ok.usage["completion_tokens"] > 0
    # Round 2's prompt shows round 1's candidates with their measured speedups.
    assert len(second.records) == 2
    by_id = {r.record_id: r for r in first.records}
    for record in second.records:
        prompt = record.prompt_messages[-1].content
        assert record.exemplars and bad.record_id in {e.record_id for e in record.exemplars}
        for ref in record.exemplars:
            shown = by_id[ref.record_id]
            assert (ref.status, ref.speedup) == (shown.status, shown.speedup)
            if shown.status == "ok":
                assert f"speedup {shown.speedup:.2f}x" in prompt
            else:
                assert f"FAILED, status {shown.status}" in prompt
    # The trace holds every record once, in order; events said the same.
    assert [r.record_id for r in records] == [r.record_id for r in first.records
                                              + second.records]
    finished = events.of(CandidateFinished)
    assert sorted(e.record_id for e in finished) == sorted(r.record_id for r in records)
    assert events.of(StreamChunk) and events.of(SessionOpened)
    assert [e.round for e in events.of(RoundFinished)] == [1, 2]

    # Accept commits the candidate to the session's git repo; undo reverts it.
    engine = Engine(PROBLEM, settings_for(tmp_path, replay.base_url), emit=events,
                    resume=first.records[0].session_id, sizes="cpu")
    engine.open()
    try:
        sha = engine.accept(ok.record_id)
        repo = git.Repo(engine.session_path)
        assert repo.head.commit.hexsha == sha
        assert (Path(engine.session_path or "") / "model.py").read_text() == ok.code
        accepted = engine.accepted()
        assert accepted is not None and accepted.record_id == ok.record_id
        assert engine.undo() is not None
        assert engine.accepted() is None
        assert (Path(engine.session_path or "") / "model.py").read_text() != ok.code
    finally:
        engine.close()


def test_builtin_only_session_without_a_model_server(tmp_path: Path) -> None:
    events = Events()
    settings = settings_for(tmp_path, closed_port_url(), use_builtin=True,
                            connect_timeout_s=0.5, candidates_per_round=1)
    engine = Engine(PROBLEM, settings, emit=events, sizes="cpu")
    engine.open()
    try:
        assert not engine.model_available
        errors = events.of(EngineError)
        assert len(errors) == 1 and errors[0].recoverable and errors[0].fix
        summaries = engine.run_rounds(4)
        records = engine.records()
        best = engine.best()
    finally:
        engine.close()
    # Built-in only, one candidate a round: each round offers an untried strategy while one
    # is left; then it says so plainly (an info, no round started or charted) and stops.
    assert len(summaries) == 3
    assert [len(s.records) for s in summaries] == [1, 1, 0]
    assert [r.source for r in sorted(records, key=lambda r: r.round)] == [
        "builtin:diag-broadcast", "builtin:torch-compile-default"]
    assert [e.round for e in events.of(RoundStarted)] == [1, 2]
    assert [e.round for e in events.of(RoundFinished)] == [1, 2]
    assert events.of(EngineError)[-1].severity == "info"
    assert "diag-broadcast, torch-compile-default" in events.of(EngineError)[-1].message
    assert all(r.result.correct for r in records), [r.result.message for r in records]
    for record in records:  # rejected, if at all, only for a noisy shared CPU's timing
        rejects = {f.code for f in record.result.flags if f.severity == "reject"}
        assert rejects <= TIMING_NOISE, record.result.message
    assert any(r.status == "ok" for r in records) == (best is not None)
    assert summaries[2].nothing_to_do and "nothing new" in summaries[2].message
    assert "nothing new" in events.of(EngineError)[-1].message


def test_cancel_during_generation_and_during_evaluation(tmp_path: Path) -> None:
    config = ReplayConfig(replies=(Reply(GOOD),), latency_s=0.05, chunk_chars=4)
    with ReplayServer(config) as server:
        events = Events()
        settings = settings_for(tmp_path, server.base_url, candidates_per_round=1,
                                timing_budget_s=3.0)
        engine = Engine(PROBLEM, settings, emit=events, sizes="cpu")
        engine.open()
        try:
            # 1. mid-stream
            events.hooks.append(lambda e: isinstance(e, StreamChunk) and engine.cancel())
            started = time.monotonic()
            summary = engine.run_round()
            assert summary.cancelled and summary.records == []
            assert time.monotonic() - started < 30
            assert events.of(RoundFinished)[-1].cancelled
            # 2. mid-evaluation: the evaluator subprocess is stopped, nothing is recorded
            events.hooks[:] = [lambda e: isinstance(e, StageChanged)
                               and e.stage in ("verifying", "timing") and engine.cancel()]
            summary = engine.run_round()
            assert summary.cancelled and summary.records == []
            assert engine.records() == []
        finally:
            engine.close()
    with Session.open(summary_session(events), tmp_path / "sessions", readonly=True) as session:
        assert session.records() == [] and session.warnings == []


CRASHES = GOOD.replace("return a.unsqueeze(-1) * b", "return torch.mm(a, b)")


def test_model_failures_are_reported_then_a_failure_is_repaired(tmp_path: Path) -> None:
    """HTTP 500, then a stream cut mid-way: two errors, the cut reply's partial text recorded as
    cut, the session goes on. Then a reply that crashes at run time; the next round asks the
    model to repair it."""
    replies = (Reply(CRASHES, key="# Previous CUDA Implementations"),
               Reply(GOOD, key="# Failed Implementation"))
    config = ReplayConfig(replies=replies, fail_requests=(1,), cut_requests=(2,))
    with ReplayServer(config) as server:
        events = Events()
        settings = settings_for(tmp_path, server.base_url, candidates_per_round=1)
        engine = Engine(PROBLEM, settings, emit=events, sizes="cpu")
        engine.open()
        try:
            summaries = engine.run_rounds(4)
            records = engine.records()
        finally:
            engine.close()
    errors = events.of(EngineError)
    assert len(errors) == 2 and all(e.fix and e.recoverable for e in errors)
    assert [len(s.records) for s in summaries] == [0, 1, 1, 1]
    cut, crashed, repaired = records
    assert cut.status == "rejected" and cut.raw_response and cut.usage["cut"]
    assert [f.code for f in cut.result.flags] == ["stream_cut"]
    assert cut.round == 1 and "connection dropped" in cut.usage["cut"]
    assert crashed.status == "runtime_error" and crashed.round == 2
    assert repaired.round == 3 and repaired.result.correct
    assert [(e.record_id, e.role) for e in repaired.exemplars] == [(crashed.record_id, "repair")]
    prompt = repaired.prompt_messages[-1].content
    assert "# Failed Implementation" in prompt and "torch.mm(a, b)" in prompt


def summary_session(events: Events) -> str:
    opened = events.of(SessionOpened)
    assert opened
    return str(opened[0].session_id)


CHILD = """
import json, sys
from pathlib import Path
from cudal1_tui.config import Settings
from cudal1_tui.engine.engine import Engine

settings = Settings(**json.loads(sys.argv[1]))
def emit(event):
    print(json.dumps({"type": type(event).__name__, **vars(event)}, default=str), flush=True)
engine = Engine(Path(sys.argv[2]), settings, emit=emit, sizes="cpu")
engine.open()
engine.run_rounds(3)
"""


def test_resume_after_sigkill_mid_evaluation(tmp_path: Path) -> None:
    with ReplayServer(ReplayConfig(replies=(Reply(GOOD),))) as server:
        settings = settings_for(tmp_path, server.base_url, timing_budget_s=2.0)
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, json.dumps(vars(settings)), str(PROBLEM)],
            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, cwd=ROOT)
        assert child.stdout is not None
        session_id, finished = "", 0
        try:
            for line in child.stdout:
                event = json.loads(line)
                if event["type"] == "SessionOpened":
                    session_id = event["session_id"]
                if event["type"] == "CandidateFinished":
                    finished += 1
                if finished == 1 and event["type"] == "StageChanged" and \
                        event["stage"] in ("verifying", "timing"):
                    break  # slot 1 of round 1 is mid-evaluation
        finally:
            below = descendants(child.pid)
            child.kill()  # SIGKILL
            child.wait()
            for pid in below:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        assert session_id and finished == 1

        events = Events()
        engine = Engine(PROBLEM, settings, emit=events, resume=session_id, sizes="cpu")
        engine.open()
        try:
            before = engine.records()
            assert len(before) == 1 and before[0].round == 1
            assert events.of(SessionOpened)[0].resumed
            summary = engine.run_round()
            after = engine.records()
        finally:
            engine.close()
    assert summary.round == 2 and len(summary.records) == 2
    ids = [r.record_id for r in after]
    assert len(ids) == len(set(ids)) == 3 and ids[0] == before[0].record_id
