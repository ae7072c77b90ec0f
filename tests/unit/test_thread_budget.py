"""One thread budget for every side: when the reference is also timed at the candidate's
thread count (the parent's own reading of its CPU, never its word)."""

from __future__ import annotations

from cudal1_evaluator.parent import reference_runner, thread_budget


def test_a_candidate_on_one_core_beside_a_two_thread_reference_is_matched() -> None:
    assert thread_budget.budget([0.37, 0.31, 0.4], reference_threads=2) == 1
    # the hand-over dilutes a window's parallelism below a whole core: still one thread
    assert thread_budget.budget([0.13, 0.2], reference_threads=8) == 1
    assert thread_budget.budget([2.9, 3.1, 3.0], reference_threads=8) == 3


def test_nothing_to_match_when_the_candidate_uses_what_the_reference_may() -> None:
    assert thread_budget.budget([1.9, 1.8], reference_threads=2) is None
    assert thread_budget.budget([1.6, 1.6], reference_threads=2) is None  # rounds to 2
    assert thread_budget.budget([0.4], reference_threads=1) is None  # OMP_NUM_THREADS=1
    assert thread_budget.budget([], reference_threads=4) is None  # never read


def test_parallelism_is_cpu_over_wall() -> None:
    assert thread_budget.parallelism(30.0, 20.0) == 1.5
    assert thread_budget.parallelism(None, 20.0) is None
    assert thread_budget.parallelism(-1.0, 20.0) == 0.0
    assert thread_budget.parallelism(5.0, 0.0) is None


def test_the_matched_runner_sets_the_thread_count_at_import() -> None:
    source = reference_runner.source("class Model: pass\n",
                                     {"settings": {}, "autocast": None, "threads": 1})
    assert "_cudal1_torch.set_num_threads(1)" in source.splitlines()
    for bad in (0, -3, True, 5000, None):
        text = reference_runner.source("class Model: pass\n",
                                       {"settings": {}, "autocast": None, "threads": bad})
        assert "set_num_threads" not in text


def test_the_flag_says_what_was_read_and_done() -> None:
    reason = thread_budget.flag_reason([0.4, 0.35], 2, 1)
    assert "0.38 cores" in reason and "torch.set_num_threads(1)" in reason
    assert "not asked" in reason
