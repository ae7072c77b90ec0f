"""Outputs of different calls in one memory (``reused``): how a reused call is reported and
counted (docs/security.md, round 39). A reused call is never compared: its memory holds a
later call's output.
"""

from __future__ import annotations

from types import SimpleNamespace

from cudal1_evaluator.common.compare import Comparison
from cudal1_evaluator.isolation.sandbox import Outcome
from cudal1_evaluator.parent import conduct, verdict
from cudal1_evaluator.parent.conduct import Evidence
from cudal1_evaluator.schema import TrialReport
from cudal1_evaluator.trusted.referee import LATE_MESSAGE, Referee
from cudal1_evaluator.wire.report import Recheck, WorkerReport


def test_a_reused_call_is_reported_as_not_compared_and_not_counted_as_compared() -> None:
    """A reused call that did not fail was never judged: ``compared`` False, and the recheck
    leaves it out of the "N of M timed outputs" (a failing one counts, compared or not)."""
    unjudged = Referee._result(None, [], late=False)
    assert unjudged["ok"] and unjudged["reused"] and not unjudged["compared"]
    assert unjudged["message"].startswith("not compared")
    late = Referee._result(None, [], late=True)
    assert not late["ok"] and not late["compared"] and late["message"] == LATE_MESSAGE
    right = Referee._result(Comparison(True), [], late=False)
    wrong = Referee._result(Comparison(False, 1.0, 1.0, "outside atol"), [], late=False)
    assert right["compared"] and wrong["compared"] and not right["reused"]

    fake = SimpleNamespace(ev=Evidence(trials=[TrialReport(0, True)], timed=True))
    conduct.Conductor._recheck(fake, [unjudged] * 3 + [right])  # type: ignore[arg-type]
    assert fake.ev.recheck == Recheck(1, 0, "")
    conduct.Conductor._recheck(fake, [unjudged, wrong, late])  # type: ignore[arg-type]
    assert fake.ev.recheck == Recheck(3, 2, "timed call 2: outside atol")
    flags = verdict._flags_of(Outcome(returncode=0), WorkerReport(phase="done"), fake.ev)
    reason = next(f.reason for f in flags if f.code == "timed_output_mismatch")
    assert reason.startswith("2 of 3 timed outputs checked")
