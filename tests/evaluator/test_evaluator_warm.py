"""Warm workers: started ahead (torch imported, nothing seen), used once, never left behind."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from evaluator_cases import LINEAR_HONEST, LINEAR_PROBLEM, job, linear_candidate, until

from cudal1_evaluator.isolation.sandbox import Child, Limits, Outcome
from cudal1_evaluator.launch import _profile_apart, evaluate, limits_for
from cudal1_evaluator.parent import warm
from cudal1_evaluator.schema import Flag, Job
from cudal1_evaluator.wire.report import WorkerReport


def test_an_evaluation_leaves_one_warm_worker_and_the_next_uses_it(tmp_path: Path) -> None:
    """In the app's own build root (not the default one): warm children are made for the
    root the last job built in, so the next job of the session finds them usable."""
    warm.discard_all()
    built_in = tmp_path / "builds"
    first = evaluate(job(LINEAR_PROBLEM, LINEAR_HONEST, built_in))
    assert first.status == "ok", first.message
    assert warm.count() == 3  # the candidate's runner, the reference's runner, a referee
    time.sleep(3.0)  # the model writing the next candidate: the warm worker imports torch
    limits = limits_for("cpu", 6144, 120.0)
    text = job(LINEAR_PROBLEM, LINEAR_HONEST, built_in).to_json()
    taken = warm.take("run", "cpu", limits, text, str(built_in))
    assert taken is not None and taken.alive() and warm.count() == 2
    taken.discard()
    second = evaluate(job(LINEAR_PROBLEM, LINEAR_HONEST, built_in))
    assert second.status == "ok", second.message
    warm.discard_all()
    assert warm.count() == 0


def test_a_warm_child_is_never_handed_out_for_a_build_dir_it_cannot_write(
        tmp_path: Path) -> None:
    warm.discard_all()
    limits = limits_for("cpu", 6144, 120.0)
    mine, other = tmp_path / "mine", tmp_path / "other"
    warm.prepare("run", "cpu", limits, str(mine))
    elsewhere = job(LINEAR_PROBLEM, LINEAR_HONEST, other).to_json()
    assert warm.take("run", "cpu", limits, elsewhere, str(mine)) is None  # discarded
    assert warm.count() == 0
    warm.prepare("run", "cpu", limits, str(mine))
    here = job(LINEAR_PROBLEM, LINEAR_HONEST, mine).to_json()
    assert warm.take("run", "cpu", limits, here, str(other)) is None  # another kind
    taken = warm.take("run", "cpu", limits, here, str(mine))
    assert taken is not None and taken.covers(here)
    taken.discard()
    warm.discard_all()


def test_a_warm_child_is_handed_out_only_once_ready(tmp_path: Path,
                                                  caplog: Any) -> None:
    """Taken while it still imports, a warm child is waited for (never slower than a cold
    one); one that dies before its warm-up is done is never handed out, and says why."""
    warm.discard_all()
    limits = limits_for("cpu", 6144, 120.0)
    here = job(LINEAR_PROBLEM, LINEAR_HONEST, tmp_path).to_json()
    warm.prepare("run", "cpu", limits, str(tmp_path))
    taken = warm.take("run", "cpu", limits, here, str(tmp_path))  # at once: still importing
    assert taken is not None and taken.alive() and taken.ready()
    taken.discard()
    warm.prepare("run", "cpu", limits, str(tmp_path))
    dying = warm._idle[next(iter(warm._idle))]
    dying.proc.kill()  # as a warm-up that fails does: the process ends before it is ready
    assert warm.take("run", "cpu", limits, here, str(tmp_path)) is None
    assert "died before it was ready" in caplog.text
    warm.discard_all()


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
    assert warm.count() == 3  # and a warm reference runner and referee
    body = ("        big = torch.ones(2**31, dtype=torch.float32)  # 8 GiB > the 6 GiB limit\n"
            "        return torch.relu(self.fc(x)) + big[0]")
    # another timeout (so another CPU-time limit), same kind: the warm worker is used
    result = evaluate(job(LINEAR_PROBLEM, linear_candidate(body), timeout_s=90.0))
    assert result.status == "runtime_error" and "out of memory" in result.message


def test_a_profile_child_loads_the_candidate_and_skips_correctness_and_timing() -> None:
    honest = job(LINEAR_PROBLEM, LINEAR_HONEST)
    child = Child("profile", launch_limits(honest), warm_device="cpu")
    report = WorkerReport.from_dict(_payload(child.run(honest.to_json(), 120.0)))
    assert report.phase == "done" and not report.error_kind, report.error
    assert list(report.phases) == ["setup", "build", "lock_down", "profile"]
    assert not report.trials and not report.timing


def test_a_candidate_failing_in_the_profile_child_fails_the_evaluation() -> None:
    # what the timing worker saw is not enough: the profiler pass loads the candidate again
    broken = job(LINEAR_PROBLEM, linear_candidate("        return self.fc(x)",
                                                  header="raise RuntimeError('second load')"))
    report = WorkerReport(phase="done", flags=[Flag("own_inputs", "kept", "warn")])
    child = Child("profile", launch_limits(broken), warm_device="cpu")
    _profile_apart(child, broken, report, None, None)
    assert report.phase == "profile" and report.error_kind == "compile"
    assert "in the profiler pass" in report.error and "second load" in report.error
    assert [f.code for f in report.flags].count("own_inputs") == 1


def launch_limits(j: Job) -> Limits:
    return limits_for(j.device, j.memory_limit_mb, j.timeout_s, j.cpu_time_limit_s)


def _payload(outcome: Outcome) -> dict[str, Any]:
    assert outcome.payload is not None, outcome.stderr_tail
    return outcome.payload


def _states(child: Child) -> set[str]:
    """The scheduler states of the processes in a warm child's process group."""
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if int(fields[2]) == child.proc.pid:
            found.add(fields[0])
    return found


def test_warm_children_are_stopped_while_a_host_window_is_timed(tmp_path: Path) -> None:
    """Warm children still importing for the next evaluation never run beside a timed host
    window: every idle one is stopped while a window is open, resumed when the last one
    closes, and one taken meanwhile is handed out running."""
    from cudal1_evaluator.parent.window_gate import Gate

    warm.discard_all()
    limits = limits_for("cpu", 6144, 120.0)
    warm.prepare("run", "cpu", limits, str(tmp_path))
    warm.prepare("referee", "cpu", limits, str(tmp_path))
    children = list(warm._idle.values())
    gate = Gate(on_open=warm.hold_idle, on_close=warm.release_idle)
    with gate.window():
        assert all(until(lambda c=c: _states(c) == {"T"}) for c in children)
        with gate.window():  # nested: still held
            pass
        assert all(_states(c) == {"T"} for c in children)
        text = job(LINEAR_PROBLEM, LINEAR_HONEST, tmp_path).to_json()
        taken = warm.take("run", "cpu", limits, text, str(tmp_path), wait=False)
        assert taken is not None
        assert until(lambda: "T" not in _states(taken))
        (referee,) = warm._idle.values()
        assert _states(referee) == {"T"}
    assert until(lambda: "T" not in _states(referee))
    taken.discard()
    warm.discard_all()


def test_the_reference_runner_is_warmed_without_the_dtype_watch(tmp_path: Path) -> None:
    """The reference's runner never runs a correctness trial: its warm-up skips the dtype
    watch's first use (seconds of CPU), and it still gets ready."""
    warm.discard_all()
    limits = limits_for("cpu", 6144, 120.0)
    warm.prepare("run", "cpu", limits, str(tmp_path), tag="reference", watch_warm_up=False)
    (child,) = warm._idle.values()
    assert "--no-watch-warm-up" in child.proc.args
    assert warm.await_ready(child, "run")
    warm.discard_all()


def test_a_warm_child_outlives_the_thread_that_asked_for_it(tmp_path: Path) -> None:
    """A child dies with the *thread* that forked it (its parent-death signal follows the
    thread): one prepared from an evaluation's short-lived thread must still be alive, and
    ready, once that thread has ended (a headless run of several problems lost its warm
    children to SIGKILL that way, and an evaluation that had taken one mid-start ended in
    ``runtime_error``)."""
    import threading

    warm.discard_all()
    limits = limits_for("cpu", 6144, 120.0)
    ready: list[bool] = []

    def evaluation() -> None:  # asks, then lives on past the child's start-up, then ends
        warm.prepare("run", "cpu", limits, str(tmp_path))
        (child,) = warm._idle.values()
        ready.append(warm.await_ready(child, "run"))

    asker = threading.Thread(target=evaluation)
    asker.start()
    asker.join()
    (child,) = warm._idle.values()
    assert ready == [True], child.stderr_tail()
    time.sleep(0.5)  # a parent-death signal would have landed by now
    assert child.alive(), child.stderr_tail()
    warm.discard_all()
