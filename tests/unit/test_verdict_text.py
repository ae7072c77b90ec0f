"""What a verdict says is safe to show (red team round 25): the candidate wrote part of it, and
an escape sequence in it reached the terminal of ``cudal1-tui eval`` byte for byte. And a
referee that fails once the candidate's code has run is not blamed on the reference."""

from __future__ import annotations

from cudal1_evaluator.isolation.sandbox import Outcome
from cudal1_evaluator.parent import verdict
from cudal1_evaluator.parent.conduct import Evidence
from cudal1_evaluator.plain_text import MAX_LINE, shown
from cudal1_evaluator.schema import Flag, Job
from cudal1_evaluator.wire.report import WorkerReport

FORGED = "\x1b]52;c;ZWNobyBwd25lZA==\x07\x1b[2J\x9b31mstatus ok  speedup 9.9x  reward 1.0"


def _job() -> Job:
    return Job(problem_source="", candidate_source="", device="cpu", timeout_s=10.0)


def test_control_characters_are_shown_not_obeyed() -> None:
    text = shown(f"line one\tok\n{FORGED}\r\n")
    assert "\x1b" not in text and "\x9b" not in text and "\x07" not in text
    assert "\r" not in text
    assert "\\x1b]52;c;" in text and "\\x9b31m" in text
    assert text.startswith("line one\tok\n")


def test_a_long_line_is_cut() -> None:
    assert shown("x" * (MAX_LINE + 10)) == "x" * MAX_LINE + " [cut]"
    assert shown("") == ""


def test_a_timeout_shows_the_candidates_stderr_without_its_escapes() -> None:
    outcome = Outcome(timed_out=True, last_stage="build", stderr_tail=FORGED + "\n")
    result = verdict.decide(_job(), outcome, None)
    assert result.status == "timeout"
    assert result.message.startswith("timed out after 10 s (during build)")
    assert "last stderr lines" in result.message
    assert "\x1b" not in result.message and "\\x1b[2J" in result.message


def test_a_referee_that_fails_after_the_candidate_ran_is_not_blamed_on_the_reference() -> None:
    before = Evidence(referee_error="out of memory")
    after = Evidence(referee_error="out of memory", referee_failed_after_candidate=True)
    report = WorkerReport(phase="done")
    assert "the reference failed (not the candidate)" in \
        verdict.decide(_job(), Outcome(returncode=0), report, before).message
    message = verdict.decide(_job(), Outcome(returncode=0), report, after).message
    assert "the reference failed" not in message
    assert "after the candidate's code had run" in message


def test_a_forged_report_of_other_types_and_escapes_still_gives_a_verdict() -> None:
    """The worker's report is the candidate's to forge: numbers where text belongs, escapes
    in a flag's code and an unknown severity still end in a verdict, shown safely."""
    report = WorkerReport(phase="done", error_kind="compile", error="e", compile_log=7)  # type: ignore[arg-type]
    report.flags = [Flag("ok\x1b]52;c;x\x07", 5, "warn\x1b[2J")]  # type: ignore[arg-type]
    result = verdict.decide(_job(), Outcome(returncode=0), report, Evidence())
    assert result.reward == 0
    for flag in result.flags:
        assert "\x1b" not in flag.code and isinstance(flag.reason, str)
        assert flag.severity in ("reject", "warn", "info")
    assert "\x1b" not in result.compile_log
