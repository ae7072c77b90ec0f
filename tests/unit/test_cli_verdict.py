"""One rendering of what a verdict says, shared by `cudal1-tui eval`, the detail pane and the
Logs tab."""

from __future__ import annotations

import io

from rich.console import Console

from cudal1_evaluator.schema import Flag, Result
from cudal1_tui.present.verdict_text import record_details, verdict_details
from cudal1_tui.records import CandidateRecord, result_from_stored

LOG = "\n".join(f"line {i}" for i in range(50))


def _compile_error() -> Result:
    return Result(status="compile_error", message="the candidate does not compile",
                  compile_log=LOG, flags=[Flag("static.streams", "a side stream", "warn"),
                                          Flag("static.gc", "walks the heap")])


def test_details_list_message_flags_and_the_compile_tail() -> None:
    text = verdict_details(_compile_error(), parse_error="", compile_tail=3)
    assert text.plain.splitlines() == [
        "the candidate does not compile",
        "integrity warn: static.streams: a side stream",
        "integrity reject: static.gc: walks the heap",
        "line 47", "line 48", "line 49",
    ]
    assert len(verdict_details(_compile_error(), compile_tail=None).plain.splitlines()) == 53


def test_a_clean_ok_says_nothing_and_a_parse_error_comes_first() -> None:
    assert verdict_details(Result(status="ok")).plain == ""
    refused = Result(status="rejected", message="no code block",
                     flags=[Flag("parse_error", "no code block")])
    # the message repeats the reject's reason: said once (issue 23: no rejection twice)
    assert verdict_details(refused, parse_error="the reply has no code").plain.splitlines() == [
        "the reply has no code", "integrity reject: parse_error: no code block"]


def test_a_stored_record_renders_like_its_result() -> None:
    result = _compile_error()
    record = _record(result, result.status)
    assert record_details(record).plain == verdict_details(result).plain
    bare = _record(result_from_stored({}, "timeout"), "timeout")
    assert record_details(bare).plain == ""  # a record stored without a result still renders


def _record(result: Result, status: str) -> CandidateRecord:
    return CandidateRecord(record_id="r1", session_id="s", round=1, slot=0, source="model",
                           problem_name="p", code="", result=result, reward=0.0,
                           reward_formula="clipped_speedup", status=status, speedup=None)


def test_the_eval_summary_prints_the_same_details() -> None:
    from cudal1_tui.cli.commands.eval_cmd import _print_summary

    out = io.StringIO()
    _print_summary(_compile_error(), Console(file=out, width=120))
    printed = out.getvalue()
    assert printed.startswith("compile_error  speedup -  reward 0 (clipped_speedup)")
    assert verdict_details(_compile_error(), compile_tail=None).plain in printed
