"""The domain records at the store's boundary: typed results, old rows, findings shown once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cudal1_evaluator.schema import Flag, Result, TimingSummary
from cudal1_tui.engine.recording import Draft, finish
from cudal1_tui.records import DRAFT_FIELDS, CandidateRecord, flag_codes, result_from_stored
from cudal1_tui.store.trace import read_trace

# A row as cudal1-tui wrote it before precision parity and the build cache: no
# speedup_strict, precision, build_cached, profile; a gate finding copied from the flags.
OLD_ROW = {
    "record_id": "r001s0-abcdef", "session_id": "s", "round": 1, "slot": 0, "source": "model",
    "problem_name": "relu", "code": "class ModelNew: pass\n", "reward": 0.5,
    "reward_formula": "clipped_speedup", "status": "ok", "speedup": 1.5,
    "result": {"status": "ok", "correct": True, "speedup": 1.5, "message": "",
               "flags": [{"code": "static_timer", "reason": "imports time", "severity": "warn"}],
               "trials": [{"trial": 0, "ok": True, "max_abs_err": 1e-7}],
               "timing": {"reference": {"median_ms": 3.0, "p10_ms": 2.9, "p90_ms": 3.1},
                          "candidate": {"median_ms": 2.0, "p10_ms": 1.9, "p90_ms": 2.1}}},
    "gate_findings": [{"code": "static_timer", "reason": "imports time", "severity": "warn"},
                      {"rule": "static_legacy", "reason": "only in the gate"}],
    "kind": "candidate", "schema_version": 1,
}


def test_an_old_row_loads_typed_with_each_finding_once() -> None:
    record = CandidateRecord.from_dict(OLD_ROW)
    assert isinstance(record.result, Result)
    assert record.result.timing["candidate"].median_ms == 2.0
    assert record.result.speedup_strict is None and record.result.precision == {}
    assert [g.code for g in record.gate_findings] == ["static_legacy"]
    assert record.flag_codes(include_info=False) == ["static_timer", "static_legacy"]


def test_a_row_round_trips_through_json() -> None:
    record = CandidateRecord.from_dict(OLD_ROW)
    again = CandidateRecord.from_dict(json.loads(json.dumps(record.to_dict())))
    assert again == record


def test_a_result_without_a_status_takes_the_records() -> None:
    assert result_from_stored({}, "compile_error").status == "compile_error"
    assert result_from_stored({"status": "bogus"}, "").status == "runtime_error"


@pytest.mark.parametrize("bad", [
    "not an object", {"flags": ["x"]}, {"trials": [3]}, {"timing": {"reference": 1}},
])
def test_malformed_results_are_refused_with_a_reason(bad: object) -> None:
    with pytest.raises(ValueError):
        result_from_stored(bad, "ok")


def test_a_malformed_row_is_skipped_with_a_warning(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    broken = {**OLD_ROW, "record_id": "bad", "result": {"flags": [1]}}
    trace.write_text(json.dumps(broken) + "\n" + json.dumps(OLD_ROW) + "\n")
    contents = read_trace(trace)
    assert [r.record_id for r in contents.candidates] == ["r001s0-abcdef"]
    assert any("malformed candidate" in w for w in contents.warnings)


def test_info_notes_only_when_asked_for_and_each_code_once() -> None:
    flags = [Flag("speedup_within_noise", "", "info"), Flag("tf32", "", "warn"),
             Flag("tf32", "again", "warn")]
    assert flag_codes(flags, include_info=True) == ["speedup_within_noise", "tf32"]
    assert flag_codes(flags, include_info=False) == ["tf32"]


def test_a_finished_record_keeps_the_draft_and_shows_a_gate_warning_once() -> None:
    draft = Draft(2, 1, "model", code="x = 1\n", raw_response="reply", usage={"cut": "eos"})
    result = Result(status="ok", correct=True, speedup=1.2,
                    flags=[Flag("static_sync", "calls synchronize", "warn")],
                    timing={"reference": TimingSummary(median_ms=1.2),
                            "candidate": TimingSummary(median_ms=1.0)})
    record = finish(draft, result, session_id="s", problem_name="p")
    assert all(getattr(record, name) == getattr(draft, name) for name in DRAFT_FIELDS)
    assert record.result is result and record.gate_findings == []
    assert record.flag_codes(include_info=False) == ["static_sync"]
    assert record.record_id.startswith("r002s1-") and record.started_at


def test_traces_written_by_earlier_versions_load_without_warnings() -> None:
    root = Path(__file__).resolve().parents[2]
    traces = sorted([*(root / "docs").glob("benchmarks/**/trace.jsonl"),
                     *(root / "examples").glob("sessions/**/trace.jsonl")])
    assert traces, "the repository ships recorded traces"
    for trace in traces:
        contents = read_trace(trace)
        assert contents.warnings == [] and contents.candidates, trace
        for record in contents.candidates:
            assert isinstance(record.result, Result)
            assert CandidateRecord.from_dict(json.loads(json.dumps(record.to_dict()))) == record


def test_a_rejected_record_that_ran_correctly_keeps_its_speedup() -> None:
    """Issue 22: "1.87x, rejected: returns a CUDA graph's static output buffer"."""
    draft = Draft(1, 0, "model", code="x = 1\n")
    rejected = Result(status="rejected", correct=True, speedup=1.87,
                      flags=[Flag("output_buffer_reused", "static output")])
    assert finish(draft, rejected, session_id="s", problem_name="p").speedup == 1.87
    wrong = Result(status="incorrect", correct=False, speedup=3.0)
    assert finish(draft, wrong, session_id="s", problem_name="p").speedup is None
