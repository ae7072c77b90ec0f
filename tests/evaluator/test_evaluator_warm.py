"""Warm workers: started ahead (torch imported, nothing seen), used once, never left behind."""

from __future__ import annotations

import os
import time

from evaluator_cases import LINEAR_HONEST, LINEAR_PROBLEM, job, linear_candidate

from evaluator import warm
from evaluator.launch import evaluate, limits_for
from evaluator.sandbox import Child


def test_an_evaluation_leaves_one_warm_worker_and_the_next_uses_it() -> None:
    warm.discard_all()
    first = evaluate(job(LINEAR_PROBLEM, LINEAR_HONEST))
    assert first.status == "ok", first.message
    assert warm.count() == 1
    time.sleep(3.0)  # the model writing the next candidate: the warm worker imports torch
    limits = limits_for("cpu", 6144, 120.0)
    taken = warm.take("run", "cpu", limits)
    assert taken is not None and taken.alive() and warm.count() == 0
    taken.discard()
    second = evaluate(job(LINEAR_PROBLEM, LINEAR_HONEST))
    assert second.status == "ok", second.message
    warm.discard_all()
    assert warm.count() == 0


def test_a_warm_child_exits_when_released_unused() -> None:
    limits = limits_for("cpu", 6144, 120.0)
    child = Child("run", limits, warm_device="cpu")
    root = child.root
    assert child.alive()
    go = child._go_w
    assert go is not None
    os.close(go)  # the parent gives up on it: the child must leave by itself
    child._go_w = None
    assert child.proc.wait(timeout=60) == 0
    child.discard()
    assert not root.exists()


def test_warm_children_can_be_turned_off() -> None:
    warm.discard_all()
    warm.enabled = False
    try:
        result = evaluate(job(LINEAR_PROBLEM, LINEAR_HONEST))
        assert result.status == "ok" and warm.count() == 0
    finally:
        warm.enabled = True


def test_a_warm_worker_takes_the_jobs_own_memory_limit() -> None:
    warm.discard_all()
    evaluate(job(LINEAR_PROBLEM, LINEAR_HONEST, timeout_s=60.0))  # leaves a warm worker
    assert warm.count() == 1
    body = ("        big = torch.ones(2**31, dtype=torch.float32)  # 8 GiB > the 6 GiB limit\n"
            "        return torch.relu(self.fc(x)) + big[0]")
    # another timeout (so another CPU-time limit), same kind: the warm worker is used
    result = evaluate(job(LINEAR_PROBLEM, linear_candidate(body), timeout_s=90.0))
    assert result.status == "runtime_error" and "out of memory" in result.message
