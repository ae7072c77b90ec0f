"""Red team round 24: a runner whose outputs the parent does not read itself (every GPU job,
and a CPU host where the parent may not read a runner's memory) was held to nothing between
its window's reply and the reading taken after the seal. A candidate that resumes itself
there (its own SIGCONT timer) could finish unsampled outputs untimed. Every span outside a
request is now bracketed by two readings at rest."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from evaluator_cases import LINEAR_PROBLEM
from test_trust_boundary import _SPINNER, _job, _resume_a_while

from cudal1_evaluator.launch import evaluate
from cudal1_evaluator.parent import conduct, output_reader


def test_a_runner_that_resumes_itself_after_its_reply_is_caught_where_nothing_is_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(output_reader, "may_read", lambda pid: False)  # as on a GPU
    ask = conduct.Conductor._ask_referee
    resumed: list[int] = []

    def resumes_during_the_seal(self: conduct.Conductor, message: Any, **kw: Any) -> Any:
        """The candidate's own timer, simulated: it runs (at least 50 ms, and until its CPU
        time shows it) while its seal is made."""
        if isinstance(message, dict) and message.get("op") == "seal" and \
                message.get("runner") == conduct.RUNNER["candidate"] and \
                message.get("handles") is not None and len(resumed) < 50:
            answer = ask(self, message, **kw)
            _resume_a_while(self.wrk.child)
            resumed.append(1)
            return answer
        return ask(self, message, **kw)

    monkeypatch.setattr(conduct.Conductor, "_ask_referee", resumes_during_the_seal)
    candidate = LINEAR_PROBLEM.replace("class Model(", "class ModelNew(") + _SPINNER
    result = evaluate(replace(_job(LINEAR_PROBLEM, candidate), build_dir=str(tmp_path)))
    assert resumed, "the candidate was never sealed"
    assert "stop_escaped" in {f.code for f in result.flags}, result.message
    assert result.reward == 0
