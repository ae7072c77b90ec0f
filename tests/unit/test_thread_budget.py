"""One thread budget for every side: on a host where torch runs more than one thread, the
reference is also timed on one, whatever the candidate does, and the lowest speedup counts."""

from __future__ import annotations

from cudal1_evaluator.parent import reference_runner, thread_budget
from cudal1_evaluator.parent.conduct import Evidence
from cudal1_evaluator.parent.timing_checks import Burst
from cudal1_evaluator.parent.verdict import _one_thread_flag, _speedups
from cudal1_evaluator.schema import Result


def test_the_one_thread_reference_is_timed_wherever_torch_runs_more_than_one() -> None:
    assert thread_budget.wanted("cpu", 2) and thread_budget.wanted("cpu", 64)
    assert not thread_budget.wanted("cpu", 1)  # OMP_NUM_THREADS=1: nothing to match
    assert not thread_budget.wanted("cuda:0", 16)  # a GPU's host threads launch, not compute


def test_the_matched_runner_sets_the_thread_count_at_import() -> None:
    source = reference_runner.source("class Model: pass\n",
                                     {"settings": {}, "autocast": None, "threads": 1})
    assert "_cudal1_torch.set_num_threads(1)" in source.splitlines()
    for bad in (0, -3, True, 5000, None):
        text = reference_runner.source("class Model: pass\n",
                                       {"settings": {}, "autocast": None, "threads": bad})
        assert "set_num_threads" not in text


def _windows(per_call_ms: float) -> list[Burst]:
    return [Burst(calls=10, wall_ms=10 * per_call_ms) for _ in range(6)]


def test_the_headline_is_the_lowest_against_any_reference() -> None:
    """Busy cores: the two-thread reference stalls (5 ms a call), on one thread it does not
    (0.6 ms); a one-thread candidate at 0.55 ms a call is 1.09x, not 9x."""
    ev = Evidence(reference=_windows(5.0), candidate=_windows(0.55), one_thread=_windows(0.6))
    ev.info = {"device": {"type": "cpu", "threads": 2}}  # type: ignore[typeddict-item]
    result = Result(status="ok")
    _speedups(ev, result)
    assert result.speedup is not None and abs(result.speedup - 0.6 / 0.55) < 1e-9
    assert result.speedup_strict is not None and result.speedup_strict > 9
    (flag,) = _one_thread_flag(ev, result)
    assert flag.code == "one_thread_reference" and flag.severity == "warn"
    assert "fastest" in flag.reason


def test_a_quiet_host_keeps_the_baseline_speedup() -> None:
    ev = Evidence(reference=_windows(1.0), candidate=_windows(0.5), one_thread=_windows(1.8))
    result = Result(status="ok")
    _speedups(ev, result)
    assert result.speedup is not None and abs(result.speedup - 2.0) < 1e-9
    (flag,) = _one_thread_flag(ev, result)
    assert flag.severity == "info" and "fastest" not in flag.reason
