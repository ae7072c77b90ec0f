"""trace.jsonl: append-only rows, torn last lines, duplicates, and kill -9 mid-append."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from cudal1_evaluator.schema import Result, TimingSummary
from cudal1_tui.config import Settings
from cudal1_tui.errors import SessionError
from cudal1_tui.records import TRACE_SCHEMA_VERSION, CandidateRecord, DecisionRecord
from cudal1_tui.store import Session
from cudal1_tui.store.trace import TraceWriter, fold_decisions, read_trace

REFERENCE = "import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n" \
    "        return x * 2\n\ndef get_inputs():\n    return [torch.ones(4)]\n\n" \
    "def get_init_inputs():\n    return []\n"


def make_record(record_id: str, round_: int = 1, slot: int = 0, speedup: float = 1.5,
                status: str = "ok") -> CandidateRecord:
    ok = status == "ok"
    result = Result(status=status, correct=ok, speedup=speedup if ok else None,  # type: ignore[arg-type]
                    timing={"reference": TimingSummary(median_ms=speedup, n=10),
                            "candidate": TimingSummary(median_ms=1.0, n=10)})
    return CandidateRecord(record_id=record_id, session_id="s", round=round_, slot=slot,
                           source="model", problem_name="double",
                           code="class ModelNew: pass\n", result=result,
                           reward=speedup - 1 if ok else 0.0, reward_formula="clipped_speedup",
                           status=status, speedup=speedup if ok else None)


def write_rows(path: Path, rows: list[dict[str, object]]) -> None:
    writer = TraceWriter(path)
    writer.open()
    for row in rows:
        writer.append(row)
    writer.close()


def test_rows_round_trip_with_kind_and_schema_version(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    write_rows(trace, [make_record("a").to_dict(), DecisionRecord("a", "accepted").to_dict()])
    lines = trace.read_text().splitlines()
    assert [json.loads(x)["kind"] for x in lines] == ["candidate", "decision"]
    assert all(json.loads(x)["schema_version"] == TRACE_SCHEMA_VERSION for x in lines)
    contents = read_trace(trace)
    assert contents.warnings == []
    assert contents.candidates[0] == make_record("a")
    assert contents.folded()[0].decision == "accepted"


def test_torn_last_line_is_skipped_and_earlier_records_survive(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    write_rows(trace, [make_record("a").to_dict(), make_record("b").to_dict()])
    torn = json.dumps(make_record("c").to_dict())[:57]
    with trace.open("a") as fh:
        fh.write(torn)
    contents = read_trace(trace)
    assert [c.record_id for c in contents.candidates] == ["a", "b"]
    assert len(contents.warnings) == 1 and "torn last line" in contents.warnings[0]

    # the next writer moves the fragment aside so the new row does not glue onto it
    write_rows(trace, [make_record("d").to_dict()])
    contents = read_trace(trace)
    assert [c.record_id for c in contents.candidates] == ["a", "b", "d"]
    assert contents.warnings == []
    assert (tmp_path / "trace.jsonl.torn").read_text() == torn + "\n"


def test_complete_row_missing_only_its_newline_is_kept(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    trace.write_text(json.dumps(make_record("a").to_dict()))
    assert [c.record_id for c in read_trace(trace).candidates] == ["a"]
    write_rows(trace, [make_record("b").to_dict()])
    assert [c.record_id for c in read_trace(trace).candidates] == ["a", "b"]
    assert not (tmp_path / "trace.jsonl.torn").exists()


def test_duplicates_keep_the_first_and_bad_middle_lines_are_reported(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    first, again = make_record("a", speedup=2.0), make_record("a", speedup=9.0)
    trace.write_text("\n".join([json.dumps(first.to_dict()), "{not json", "[1, 2]",
                                json.dumps({"kind": "mystery"}), json.dumps(again.to_dict()),
                                json.dumps(make_record("b").to_dict())]) + "\n")
    contents = read_trace(trace)
    assert [(c.record_id, c.speedup) for c in contents.candidates] == [("a", 2.0), ("b", 1.5)]
    assert len(contents.warnings) == 3
    assert "unreadable line" in contents.warnings[0]


def test_latest_decision_wins() -> None:
    records = [make_record("a"), make_record("b")]
    decisions = [DecisionRecord("a", "accepted"), DecisionRecord("b", "rejected"),
                 DecisionRecord("a", "undone")]
    folded = fold_decisions(records, decisions)
    assert [r.decision for r in folded] == ["undone", "rejected"]
    assert records[0].decision == "pending"  # the originals are untouched


def test_missing_trace_reads_as_empty(tmp_path: Path) -> None:
    contents = read_trace(tmp_path / "absent.jsonl")
    assert contents.candidates == [] and contents.warnings == []


APPENDER = textwrap.dedent('''
    import sys
    from pathlib import Path
    sys.path.insert(0, sys.argv[2])
    from test_trace import make_record
    from cudal1_tui.store import Session

    session = Session.open(Path(sys.argv[1]))
    big = "# padding\\n" * 20000  # a large row widens the window a kill can hit
    for i in range(100000):
        record = make_record(f"rec{i:05d}", round_=i // 3 + 1, slot=i % 3, speedup=1.5 + i % 5)
        record.code += big
        session.append_candidate(record)
        if i % 7 == 3:
            session.accept(record.record_id)
        print(record.record_id, flush=True)
''')


@pytest.mark.timeout(120)
def test_kill_9_mid_append_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    session = Session.create(tmp_path / "double.py", REFERENCE, Settings(),
                             root=tmp_path / "sessions")
    path = session.path
    session.close()
    script = tmp_path / "appender.py"
    script.write_text(APPENDER)
    # the child imports this checkout's package, not whichever one is installed
    repo = str(Path(__file__).resolve().parents[2])
    pythonpath = os.pathsep.join(p for p in (repo, os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
           "PYTHONPATH": pythonpath}
    child = subprocess.Popen([sys.executable, str(script), str(path), str(Path(__file__).parent)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert child.stdout is not None
    printed: list[str] = []
    try:
        while len(printed) < 40:
            line = child.stdout.readline()
            assert line, f"appender died: {child.stderr.read() if child.stderr else ''}"
            printed.append(line.strip())
            if len(printed) == 5:
                with pytest.raises(SessionError, match="in use by another cudal1-tui process"):
                    Session.open(path)
                with Session.open(path, readonly=True) as reader:  # readers never wait
                    assert len(reader.records()) >= 5
        time.sleep(0.05)  # let it get into the middle of another append
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    printed += [line.strip() for line in child.stdout.read().splitlines(keepends=True)
                if line.endswith("\n")]

    # a kill mid-write can leave half a row; simulate the worst case on top of the kill
    with (path / "trace.jsonl").open("a") as fh:
        fh.write(json.dumps(make_record("rec-torn").to_dict())[:100])
    with Session.open(path, readonly=True) as reader:
        assert any("torn last line" in w for w in reader.warnings)
        ids = [r.record_id for r in reader.records()]

    assert len(ids) == len(set(ids)), "a record was duplicated"
    assert set(printed) <= set(ids), "an fsynced record was lost"
    assert ids == sorted(ids) and "rec-torn" not in ids

    with Session.open(path) as resumed:  # lock released by the kill; tail repaired
        assert len(resumed.warnings) == 1 and "moved a torn last line" in resumed.warnings[0]
        assert resumed.next_round() == max(r.round for r in resumed.records()) + 1
        # every accept commit made before the kill has its decision row in the trace
        logged = {d.commit for d in resumed.decisions()}
        assert all(e.sha in logged for e in resumed.history_log() if e.action == "accept")
        assert resumed.append_candidate(make_record("after", round_=resumed.next_round()))
        assert not resumed.append_candidate(make_record(ids[0]))  # already recorded
    with Session.open(path, readonly=True) as reader:
        final = [r.record_id for r in reader.records()]
    assert final == [*ids, "after"]
