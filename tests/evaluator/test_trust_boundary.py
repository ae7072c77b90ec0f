"""The trust boundary: verdicts come from the referee and the parent's clock, not the worker."""

from __future__ import annotations

import os
import signal
import statistics
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
from evaluator_cases import LINEAR_PROBLEM

from cudal1_evaluator.common.compare import compare_outputs
from cudal1_evaluator.isolation.sandbox import Outcome
from cudal1_evaluator.launch import evaluate
from cudal1_evaluator.parent import verdict
from cudal1_evaluator.parent.conduct import Evidence
from cudal1_evaluator.parent.timing_checks import Burst, means, ratio, reference_means
from cudal1_evaluator.schema import Job, Result, TrialReport
from cudal1_evaluator.wire.report import WorkerReport
from cudal1_evaluator.wire.tensor_exchange import export, open_shared, populate

EXPLOITS = Path(__file__).resolve().parents[1] / "exploits"
FAST = {"correctness_trials": 2, "timing_budget_s": 0.3, "warmup": 1, "min_samples": 4,
        "max_samples": 8, "timeout_s": 180.0}


def _job(problem: str, candidate: str) -> Job:
    return Job(problem_source=problem, candidate_source=candidate, device="cpu", **FAST)


def _exploit(name: str, problem: str = "matmul_relu.py") -> Job:
    return _job((EXPLOITS / "problems" / problem).read_text(),
                (EXPLOITS / "candidates" / f"{name}.py").read_text())


def test_the_reference_is_computed_where_the_candidate_never_ran() -> None:
    # a global forward hook zeroes every module's output in the candidate's process: had the
    # reference run there, the candidate's zeros would match it
    result = evaluate(_exploit("forward_hook_reference"))
    assert result.status == "incorrect" and result.reward == 0.0, result.message


def test_a_forged_worker_report_earns_nothing() -> None:
    result = evaluate(_exploit("forged_report"))
    assert result.status != "ok" and result.reward == 0.0 and result.speedup is None
    assert "no_worker_report" in {f.code for f in result.flags}


def test_mutation_in_a_timed_round_is_caught() -> None:
    result = evaluate(_exploit("mutation_timed_only", "elementwise.py"))
    assert result.status == "rejected" and result.reward == 0.0
    assert all(t.ok for t in result.trials)  # honest during the trials
    flag = next(f for f in result.flags if f.code == "input_mutation")
    assert "input #0 in place" in flag.reason


# The linear layer without a matmul: float32 multiply-adds, which no matmul precision
# setting changes on any CPU (with bf16 units, AMX or avx512_bf16, 'medium' really makes
# matmuls compute in bf16; without them it does nothing).
NO_MATMUL_FORWARD = ("return torch.relu((x[:, None, :] * self.fc.weight[None]).sum(-1)"
                     " + self.fc.bias)")


def _medium_matmul_loses_precision() -> bool:
    """Whether this host's CPU really computes float32 matmuls in bf16 under 'medium'."""
    previous = torch.get_float32_matmul_precision()
    a, b = torch.randn(64, 128), torch.randn(128, 96)
    try:
        torch.set_float32_matmul_precision("medium")
        got = torch.nn.functional.linear(a, b.t())
    finally:
        torch.set_float32_matmul_precision(previous)
    exact = (a.double() @ b.double()).float()
    return not torch.allclose(got, exact, atol=1e-4, rtol=1e-4)


def test_precision_parity_fields_on_cpu() -> None:
    """The fields of a candidate that changes the matmul precision, whatever the host's CPU:
    its own maths use no matmul, so the setting changes no result here (issue 23)."""
    body = LINEAR_PROBLEM.replace("class Model(", "torch.set_float32_matmul_precision('medium')"
                                  "\n\n\nclass ModelNew(")
    body = body.replace("return torch.relu(self.fc(x))", NO_MATMUL_FORWARD)
    result = evaluate(_job(LINEAR_PROBLEM, body.split("batch = ")[0]))
    assert result.status == "ok", result.message
    # a CPU: "medium" is bf16 where the CPU has bf16 units, nothing where it has none
    from cudal1_evaluator.parent.precision import cpu_has_bf16_units

    assert result.precision["candidate"] == ("bf16" if cpu_has_bf16_units() else "fp32")
    assert result.precision["reference"] == "tf32"  # the matched reference: its settings
    assert "float32_matmul_precision" in result.precision["settings"]
    assert result.speedup_strict is not None and result.speedup is not None
    assert "reference_matched" in result.timing


def test_reduced_matmul_precision_is_judged_by_what_the_host_computes() -> None:
    """'medium' with a matmul: where the CPU computes it in bf16 the outputs miss the strict
    fp32 tolerance (incorrect); where the setting does nothing they match (ok). The verdict is
    right on both kinds of CPU, and the test knows which kind it runs on."""
    body = LINEAR_PROBLEM.replace("class Model(", "torch.set_float32_matmul_precision('medium')"
                                  "\n\n\nclass ModelNew(")
    result = evaluate(_job(LINEAR_PROBLEM, body.split("batch = ")[0]))
    expected = "incorrect" if _medium_matmul_loses_precision() else "ok"
    assert result.status == expected, result.message
    assert "float32_matmul_precision" in result.precision["settings"]


def test_cudnn_benchmark_gets_a_matched_runner_of_its_own() -> None:
    """cuDNN keeps plans chosen before ``cudnn.benchmark`` was turned on, so the matched
    reference runs in a runner of its own that had the candidate's settings from its import
    (the cache itself only exists on a GPU; on the CPU the whole path runs, real processes)."""
    body = LINEAR_PROBLEM.replace("class Model(", "torch.backends.cudnn.benchmark = True"
                                  "\n\n\nclass ModelNew(")
    result = evaluate(_job(LINEAR_PROBLEM, body.split("batch = ")[0]))
    assert result.status == "ok", result.message
    assert "cudnn.benchmark" in result.precision["settings"]
    matched = result.timing["reference_matched"]
    assert matched.n > 0 and matched.median_ms > 0
    assert result.speedup is not None and result.speedup_strict is not None


def test_scaled_tolerance_fails_a_fast_exp_on_tiny_outputs() -> None:
    x = torch.randn(4, 65536)
    ref = torch.softmax(x, 1)
    e = torch.exp((x - x.max(1, keepdim=True).values).bfloat16()).float()
    fast = e / e.sum(1, keepdim=True)
    assert bool(((fast - ref).abs() <= 1e-4 + 1e-4 * ref.abs()).all())  # a fixed atol passed it
    assert not compare_outputs(ref, fast, "strict").ok
    assert compare_outputs(ref, ref * (1 + 1e-6), "strict").ok


def test_a_slowed_reference_earns_at_most_five_percent() -> None:
    """A candidate can only slow the reference (leftover GPU work), never speed it up: the
    interleaved reference stands, capped at 5 % over the reference alone."""
    alone = [Burst(8, 8.0)] * 3
    slowed = [Burst(8, 16.0)] * 3
    quicker = [Burst(8, 7.2)] * 3
    assert reference_means(alone, slowed) == [pytest.approx(1.05)] * 3
    assert reference_means(alone, quicker) == [0.9] * 3
    assert reference_means([], slowed) == [2.0] * 3
    assert ratio(means(alone), means([Burst(8, 4.0)])) == pytest.approx(2.0)
    assert Burst(0, 5.0).mean_ms() == 5.0 and means([Burst(0, 5.0)]) == []


def test_a_slowed_reference_gives_way_to_the_reference_alone() -> None:
    """Twice as slow next to the candidate as alone: the speedup is taken against the
    reference alone, +5 % (1.05x here, not 2x), with a warning that says so."""
    ev = Evidence(trials=[TrialReport(0, True)], timed=True,
                  alone=[Burst(4, 4.0), Burst(4, 4.04), Burst(4, 3.96)],
                  reference=[Burst(4, 8.0), Burst(4, 8.4), Burst(4, 7.6)],
                  candidate=[Burst(4, 4.0), Burst(4, 4.0), Burst(4, 4.0)])
    job = _job(LINEAR_PROBLEM, "")
    result = verdict.decide(job, Outcome(returncode=0), WorkerReport(phase="done"), ev)
    slowed = [f for f in result.flags if f.code == "reference_slowed"]
    assert slowed and slowed[0].severity == "warn"
    assert result.status == "ok" and result.speedup == pytest.approx(1.05)
    assert result.reward <= 0.05 + 1e-9 and "reference alone 1 ms +5 %" in result.message


def test_windows_at_their_floor_are_said_to_be_an_upper_bound() -> None:
    """A fast side whose windows are mostly hand-off reads half its wall time a call (the
    floor no credit goes under): the verdict says the time is an upper bound, as a note that
    moves no reward; windows of real work say nothing."""
    fast = Burst(4, 4.0, handoff_ms=2.5, released_ms=0.5)  # 3 of 4 ms taken off: floor 2 ms
    assert fast.at_floor() and fast.mean_ms() == pytest.approx(0.5)
    slow = Burst(4, 40.0, handoff_ms=2.5, released_ms=0.5)
    assert not slow.at_floor() and slow.mean_ms() == pytest.approx(9.25)
    assert not Burst(0, 5.0).at_floor()
    job = _job(LINEAR_PROBLEM, "")
    for cand, said in (([fast] * 3, True), ([slow] * 3, False)):
        ev = Evidence(trials=[TrialReport(0, True)], timed=True,
                      alone=[slow] * 3, reference=[slow] * 3, candidate=cand)
        result = verdict.decide(job, Outcome(returncode=0), WorkerReport(phase="done"), ev)
        notes = [f for f in result.flags if f.code == "per_call_upper_bound"]
        assert bool(notes) is said and result.status == "ok"
        if said:
            assert notes[0].severity == "info" and "the candidate's 3 of 3" in notes[0].reason
            assert result.speedup == pytest.approx(9.25 / 0.5)


def test_a_speedup_is_a_bound_when_one_side_reads_its_floor() -> None:
    """The candidate's time an upper bound and the reference's not: the speedup is at least
    the one shown, said in the verdict; the reference at its floor, or both sides, or
    neither, is no bound. The reward does not move."""
    fast = Burst(4, 4.0, handoff_ms=2.5, released_ms=0.5)
    slow = Burst(4, 40.0, handoff_ms=2.5, released_ms=0.5)
    job = _job(LINEAR_PROBLEM, "")
    cases = (([slow], [fast], "at_least", "speedup at least 18.5x"),
             ([fast], [slow], "", "speedup 0.0541x"),
             ([fast], [fast], "", "speedup 1x"), ([slow], [slow], "", "speedup 1x"))
    for ref, cand, bound, said in cases:
        ev = Evidence(trials=[TrialReport(0, True)], timed=True,
                      alone=[slow] * 3, reference=ref * 3, candidate=cand * 3)
        result = verdict.decide(job, Outcome(returncode=0), WorkerReport(phase="done"), ev)
        assert result.speedup_bound == bound and result.message.startswith(said)
        assert result.timing["candidate"].at_floor is (cand[0] is fast)
        stored = Result.from_json(result.to_json())
        assert stored.speedup_bound == bound and stored.reward == result.reward


def _mapped_kb() -> int:
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    return sum(int(fields.get(k, "0 kB").split()[0]) for k in ("RssFile", "RssShmem"))


def test_shared_inputs_are_mapped_in_by_populate(tmp_path: Path) -> None:
    """A runner maps a shared input's pages in at once (``populate``, inside its window, the
    same in both runners) instead of faulting them in one by one during the calls."""
    _, desc = export(torch.randn(16 << 18), tmp_path, torch.device("cpu"))  # 16 MiB
    theirs = open_shared(desc, torch.device("cpu"))
    before = _mapped_kb()
    if not populate(theirs):
        pytest.skip("this kernel has no MADV_POPULATE_READ (Linux 5.14+)")
    assert _mapped_kb() - before >= 12 * 1024
    assert not populate(7) and not populate(torch.empty(0))


def test_shared_files_round_trip(tmp_path: Path) -> None:
    value = torch.randn(3, 5)
    mine, desc = export(value, tmp_path, torch.device("cpu"))
    theirs = open_shared(desc, torch.device("cpu"))
    assert torch.equal(theirs, value)
    theirs.mul_(2)  # the worker's writes are the referee's view
    assert torch.equal(mine, value * 2)
    assert open_shared(export(7, tmp_path, torch.device("cpu"))[1], torch.device("cpu")) == 7


def _own_ipc_namespace() -> None:
    """In a child before exec: an IPC namespace of its own (System V memory, queues)."""
    import ctypes

    if ctypes.CDLL(None, use_errno=True).unshare(0x08000000) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWIPC)")


ARENA_RUNNER = """
import ctypes, json, os, sys, torch
from cudal1_evaluator.wire import tensor_exchange as te
from cudal1_evaluator.wire.cuda_ipc import _arenas, _cuda, _Handle
from cudal1_evaluator.wire.talk import Peer
dev = torch.device('cuda')
torch.cuda.init(); torch.cuda.synchronize(dev)
peer = Peer.from_fd(int(sys.argv[1]), max_fds=1)
msg = peer.receive(timeout_s=120)
d, fds = msg['descs'], peer.fds
refused = []
for wrong in ({**d[0], 'arena': 1}, {**d[0], 'arena_bytes': d[0]['arena_bytes'] * 2,
                                     'arena_serial': -1}):
    try:
        te.open_shared(wrong, dev, fds)
        refused.append('opened')
    except (ValueError, RuntimeError) as exc:
        refused.append(str(exc))
t = te.open_shared(d[0], dev, fds); u = te.open_shared(d[1], dev, fds)
sent = fds[0]
peer.drop_fds()
try:
    os.fstat(sent)
    closed = False
except OSError:
    closed = True
legacy = ctypes.c_int(_cuda().cuIpcGetMemHandle(ctypes.byref(_Handle()), t.data_ptr()))
out = {'total': float(t.sum()), 'ones': int(u.sum()), 'maps': [m.numel() for m in _arenas.values()],
       'legacy': legacy.value, 'refused': refused, 'closed': closed, 'fds': len(peer.fds)}
t.mul_(2); torch.cuda.synchronize()
peer.send(out)
peer.receive(timeout_s=120)
"""


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("own_ipc", [False, True], ids=["host-ipc", "own-ipc-namespace"])
def test_cuda_arena_round_trip_through_a_descriptor(tmp_path: Path, own_ipc: bool) -> None:
    """Two tensors in one arena reach another process through the arena's file descriptor,
    sent over a talk socket (``SCM_RIGHTS``) as the parent relays it: the runner maps the
    arena and nothing more (not the referee's other memory), the descriptor closed once
    mapped; the description holds no handle, and the arena has no legacy IPC handle on
    either side (round 23 forged those). A size beyond the allocation is refused by the
    driver, never mapped; an index past the descriptors sent opens nothing. No file appears
    in ``/dev/shm``. ``own-ipc-namespace``: the runner in an IPC namespace of its own."""
    import ctypes
    import json
    import socket
    import subprocess
    import sys

    from cudal1_evaluator.wire.cuda_ipc import Arena, _cuda, _Handle
    from cudal1_evaluator.wire.talk import Peer
    from cudal1_evaluator.wire.tensor_exchange import arena_bytes

    if own_ipc and os.geteuid() != 0:
        pytest.skip("an IPC namespace needs root here")
    dev = torch.device("cuda")
    shm_before = set(os.listdir("/dev/shm"))
    neighbour = torch.full((1 << 20,), 7.0, device=dev)  # the referee's own, never shared
    value = torch.arange(12, dtype=torch.float32, device=dev).view(3, 4)
    other = torch.ones(5, dtype=torch.int64, device=dev)
    arena = Arena(dev, arena_bytes([value, other]))
    (mine, desc), (_, desc2) = (export(v, tmp_path, dev, arena) for v in (value, other))
    torch.cuda.synchronize()
    assert "handle" not in json.dumps([desc, desc2])
    assert desc["arena"] == desc2["arena"] == 0  # type: ignore[typeddict-item]
    assert desc["arena_bytes"] == arena.size  # type: ignore[typeddict-item]
    assert _cuda().cuIpcGetMemHandle(ctypes.byref(_Handle()), arena.ptr) != 0
    ours, theirs = socket.socketpair()
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen([sys.executable, "-c", ARENA_RUNNER, str(theirs.fileno())],
                            cwd=root, pass_fds=(theirs.fileno(),), stderr=subprocess.PIPE,
                            text=True, preexec_fn=_own_ipc_namespace if own_ipc else None)
    theirs.close()
    try:
        peer = Peer(ours)
        peer.send({"descs": [desc, desc2]}, [arena.fd])
        try:
            got = peer.receive(timeout_s=120, alive=lambda: proc.poll() is None)
        except Exception:
            proc.kill()
            raise AssertionError(proc.communicate()[1][-3000:]) from None
        assert (got["total"], got["ones"], got["maps"]) == (66.0, 5, [arena.size])
        assert got["legacy"] != 0  # the runner's mapping has no legacy handle either
        assert "did not come" in got["refused"][0]
        assert "did not map" in got["refused"][1] and "CUDA error" in got["refused"][1]
        assert got["closed"] and got["fds"] == 0  # the descriptor closed once mapped
        assert float(neighbour.sum()) == 7.0 * neighbour.numel()
        assert torch.equal(mine, value * 2)
        os.fstat(arena.fd)  # the referee's own: lent, still open
        peer.send({"op": "finish"})
        assert proc.wait(60) == 0
    finally:
        ours.close()
        if proc.poll() is None:
            proc.kill()
    # other evaluations on the host (a GPU run's other jobs) make their exchange dirs there
    made = {n for n in set(os.listdir("/dev/shm")) - shm_before if not n.startswith("cudal1-")}
    assert not made, made


def _process_state(pid: int, want: str = "T") -> str:
    """The state from /proc (R, S, T for stopped, ...), polled for ``want``: a signal is
    delivered asynchronously (and a loaded host may take seconds to run the task that takes
    it, or to bring a fresh interpreter to its sleep)."""
    deadline = time.monotonic() + 30.0
    while True:
        stat = Path(f"/proc/{pid}/stat").read_text()
        state = stat.rsplit(")", 1)[1].split()[0]  # the field after "(comm)"
        if state == want or time.monotonic() > deadline:
            return state
        time.sleep(0.01)


def test_each_child_runs_alone_while_the_other_serves_a_request(tmp_path: Path) -> None:
    """The runner is stopped while the referee works, and the referee while the runner
    works: an idle child's spinning threads never take a core from the one being timed."""
    import signal
    import subprocess
    import sys
    from types import SimpleNamespace

    from cudal1_evaluator.parent.conduct import Conductor, Running

    def child() -> subprocess.Popen[bytes]:
        return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                                start_new_session=True)

    class StateSeen:
        """A peer that answers at once and records the other child's state meanwhile."""

        def __init__(self) -> None:
            self.other_pid, self.seen = 0, ""

        def request(self, message: object, timeout_s: float, alive: object,
                    **fds: object) -> dict[str, str]:
            self.seen = _process_state(self.other_pid)
            return {}

    procs = [child(), child()]
    try:
        ref_peer, wrk_peer = StateSeen(), StateSeen()
        ref_peer.other_pid, wrk_peer.other_pid = procs[1].pid, procs[0].pid
        def signal_all(proc: subprocess.Popen[bytes]) -> object:
            return lambda sig: os.killpg(proc.pid, sig)

        referee = Running(SimpleNamespace(proc=procs[0], alive=lambda: True,  # type: ignore[arg-type]
                                          exchange=tmp_path, signal_all=signal_all(procs[0])),
                          ref_peer)
        worker = Running(SimpleNamespace(proc=procs[1], root=tmp_path, exchange=tmp_path,  # type: ignore[arg-type]
                                         alive=lambda: True, signal_all=signal_all(procs[1])),
                         wrk_peer)
        os.killpg(procs[1].pid, signal.SIGSTOP)  # as launched: the runner waits stopped
        conductor = Conductor(_job(LINEAR_PROBLEM, ""), referee, {"candidate": worker}, None)
        conductor._ask_runner("candidate", {"op": "burst", "slots": []})
        assert wrk_peer.seen == "T"  # the referee was stopped while the worker served
        assert _process_state(procs[0].pid, "S") == "S"  # and runs (sleeps) again afterwards
        assert _process_state(procs[1].pid) == "T"  # the worker waits stopped
        conductor._ask_referee({"op": "release", "sets": []})
        assert ref_peer.seen == "T"  # the worker was stopped while the referee served
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def test_windows_hold_enough_calls_that_the_hand_off_is_small() -> None:
    """A 1 ms call with a 10 ms hand-off: 100 calls keep the hand-off at a tenth of the work;
    the memory a window's sets may take caps it (a tenth of the free memory, at least 1 GiB);
    never fewer than four calls."""
    from cudal1_evaluator.parent.conduct import MIN_CALLS, calls_for

    roomy, tight = {"free_bytes": 70 << 30}, {"free_bytes": 0}
    assert calls_for(1.0, 10.0, 1 << 20, roomy, "cuda") == 100
    assert calls_for(1.0, 10.0, 1 << 27, tight, "cuda") == 8  # 8 sets of 128 MiB in 1 GiB
    assert calls_for(1.0, 10.0, 1 << 30, tight, "cuda") == MIN_CALLS
    assert calls_for(1.0, 10.0, 1 << 27, roomy, "cuda") == 56  # 7 GiB: 56 sets of 128 MiB
    assert calls_for(100.0, 1.0, 1, tight, "cpu") == MIN_CALLS
    assert calls_for(0.001, 0.5, 1, tight, "cpu") == 1024  # the most a window holds


def test_every_side_gets_windows_of_as_many_calls() -> None:
    """Round 11: a copy of the reference read 1.31x on a CPU, its windows sized from a later
    round than the reference's (291 calls against 31): a window's once cost, spread over
    fewer calls, slowed the reference's calls only. Sized together, every side gets the same
    calls, what the fastest wants, unless the slowest side's window would then hold more than
    ``WINDOW_MOST_MS`` of work: the cost then adds the same to both sides' time a call, which
    can only pull a speedup towards 1x, whichever side looked slower when sizing."""
    from cudal1_evaluator.parent.conduct import MIN_CALLS, WINDOW_MOST_MS, sized_together

    alike = sized_together({"reference": 0.25, "candidate": 0.24},
                           {"reference": 160, "candidate": 291})
    assert alike == {"reference": 291, "candidate": 291}
    noisy = sized_together({"reference": 9.0, "candidate": 0.3},  # a copy, its reference's
                           {"reference": 5, "candidate": 133})    # sizing window held up
    assert noisy == {"reference": 111, "candidate": 111}
    faster = sized_together({"reference": 21.8, "candidate": 0.135},
                            {"reference": 4, "candidate": 300})
    assert faster == {"reference": 45, "candidate": 45}
    assert WINDOW_MOST_MS >= 45 * 21.8
    slow = sized_together({"reference": 0.1, "candidate": 5000.0},
                          {"reference": 400, "candidate": 4})
    assert slow == {"reference": MIN_CALLS, "candidate": MIN_CALLS}
    matched = sized_together({"reference": 1.0, "candidate": 0.5, "matched": 0.6},
                             {"reference": 40, "candidate": 80, "matched": 67})
    assert set(matched.values()) == {80}
    assert sized_together({}, {}) == {}


def test_the_hand_off_comes_off_every_window_but_never_more_than_half() -> None:
    """A window's mean per call is its wall time less the trusted side's fixed hand-off (the
    reference runner's empty windows); a window that is mostly hand-off keeps half its time
    (a runner of its own that saves part of the hand-off gains more, the more comes off)."""
    assert Burst(10, 12.0, 2.0).mean_ms() == 1.0
    assert Burst(10, 3.0, 2.0).mean_ms() == pytest.approx(0.15)
    assert Burst(6, 11.0, 8.0).mean_ms() == pytest.approx(11.0 / 12)


def test_a_windows_once_cost_is_the_intercept_of_short_and_full_windows() -> None:
    """On an H200 (relu, 10 calls of 0.506 ms a window by the device's own events) an empty
    window took 2.155 ms and a full one 7.892: a window of calls paid about 0.68 ms once that
    the empty window did not, 13 % a call on top of do_bench. Windows of three calls (a seal
    as a full window's) and of all ten, with an empty one, give it back, as the lower bound of
    the iterations' estimates: where the windows' noise swamps it (a slow reference), nothing
    is taken off."""
    from cudal1_evaluator.parent.timing_checks import ONCE_MOST_MS, once_cost

    per_call, empty, once = 0.506, 2.155, 0.68
    jitter = [0.0, 0.01, -0.01, 0.005, -0.005, 0.0]
    walls = [(empty + once + 10 * per_call + j, empty + once + 3 * per_call - j, empty + j)
             for j in jitter]
    found = once_cost(10, 3, walls)
    assert 0.6 < found <= once + 0.01
    assert Burst(10, walls[0][0], empty + found).mean_ms() == pytest.approx(per_call, rel=0.02)
    assert Burst(10, walls[0][0], empty).mean_ms() > 1.13 * per_call  # the empty window alone
    slow = [(empty + once + 8 * 21.8 * (1 + j), empty + once + 3 * 21.8 * (1 - j), empty)
            for j in (0.03, -0.02, 0.01, -0.03, 0.02, 0.0)]
    assert once_cost(8, 3, slow) == 0.0  # 3 % noise on 170 ms windows: no bound above zero
    stalled = [(w[0], w[1] + 50.0, w[2]) for w in walls]
    assert once_cost(10, 3, stalled) == ONCE_MOST_MS
    assert once_cost(3, 3, walls) == 0.0 and once_cost(10, 3, walls[:1]) == 0.0


def test_the_once_cost_estimate_is_opt_in_and_keyed_apart_in_the_alone_cache() -> None:
    from cudal1_evaluator.parent import pristine_cache

    info = {"device": {"name": "x"}, "versions": {"torch": "2"}}
    plain = Job(problem_source="p", candidate_source="c")
    once = Job(problem_source="p", candidate_source="c", window_cost="alone_intercept")
    assert plain.window_cost == "empty"
    assert pristine_cache.key_of(plain, info) != pristine_cache.key_of(once, info)
    with pytest.raises(ValueError, match="window_cost"):
        evaluate(Job(problem_source="p", candidate_source="c", window_cost="intercept"))


_SPINNER = '''
import torch
from torch.utils.cpp_extension import load_inline

_ext = load_inline(name="between_requests_spinner", cpp_sources=[r"""
#include <atomic>
#include <thread>
static std::atomic<unsigned long> spins{0};
long start() {  // a native thread the guard cannot see: it runs whenever the process does
  std::thread([] { for (;;) spins.fetch_add(1, std::memory_order_relaxed); }).detach();
  return 0;
}
"""], functions=["start"], extra_cflags=["-O1"])
_ext.start()
'''


def _resume_a_while(child: Any) -> None:
    """The candidate's own SIGCONT timer, simulated: its processes resumed for 50 ms and until
    they have run well past what a stop being delivered may show (``ESCAPE_NS``), then stopped
    again. A fixed nap alone let a loaded host (this suite under ``nice``, beside other jobs)
    give the spinner no CPU within it: the planted escape never happened."""
    from cudal1_evaluator.parent.conduct import ESCAPE_NS

    before = child.cpu_ns().ns
    child.signal_all(signal.SIGCONT)
    try:
        time.sleep(0.05)
        deadline = time.monotonic() + 60
        while child.cpu_ns().ns - before < 4 * ESCAPE_NS and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        child.signal_all(signal.SIGSTOP)


def test_a_candidate_that_runs_between_its_requests_is_caught(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After a window's seal the candidate is stopped until its next request: its outputs are
    placed and checked meanwhile, and finishing the unsampled ones then would be work no clock
    sees. Resumed there (as its own SIGCONT timer would), a native thread runs: the readings
    before the next fill used to start afresh and saw nothing; each is now held to the one
    taken once the last request ended (``stop_escaped``)."""
    from cudal1_evaluator.parent import conduct

    window = conduct.Conductor._window
    resumed: list[int] = []

    def escape_after_the_seal(self: conduct.Conductor, side: str, ids: list[int]
                              ) -> conduct.Burst:
        burst = window(self, side, ids)
        if side == "candidate" and ids and not resumed:
            _resume_a_while(self.wrk.child)  # the escape, then stopped again
            resumed.append(1)
        return burst

    monkeypatch.setattr(conduct.Conductor, "_window", escape_after_the_seal)
    candidate = LINEAR_PROBLEM.replace("class Model(", "class ModelNew(") + _SPINNER
    result = evaluate(replace(_job(LINEAR_PROBLEM, candidate), build_dir=str(tmp_path)))
    assert resumed, "no candidate window ran"
    assert result.status == "rejected" and result.reward == 0.0, result.message
    assert "stop_escaped" in {f.code for f in result.flags}, result.message


def test_a_candidate_that_runs_while_its_outputs_are_read_is_caught(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a CPU the parent reads a window's outputs out of the stopped runner, on the clock.
    A runner that resumed itself then (its own SIGCONT timer) could finish later outputs while
    the first are read, hiding its work behind a copy both sides pay (red team round 9). The
    candidate is held to a look taken as the read starts (``stop_escaped``)."""
    from cudal1_evaluator.parent import conduct, output_reader

    read = output_reader.HostOutputs.read
    resumed: list[int] = []
    current: list[conduct.Conductor] = []
    window = conduct.Conductor._window

    def remember(self: conduct.Conductor, side: str, ids: list[int]) -> conduct.Burst:
        current[:] = [self]  # a timed window's read, not a correctness trial's
        try:
            return window(self, side, ids)
        finally:
            current.clear()

    def escape_during_the_read(self: output_reader.HostOutputs, side: str, reply: object,
                               calls: int) -> None:
        if side == "candidate" and calls and not resumed and current:
            child = current[0].runners["candidate"].child
            _resume_a_while(child)  # the escape, then stopped again
            resumed.append(1)
        read(self, side, reply, calls)

    monkeypatch.setattr(conduct.Conductor, "_window", remember)
    monkeypatch.setattr(output_reader.HostOutputs, "read", escape_during_the_read)
    candidate = LINEAR_PROBLEM.replace("class Model(", "class ModelNew(") + _SPINNER
    result = evaluate(replace(_job(LINEAR_PROBLEM, candidate), build_dir=str(tmp_path)))
    assert resumed, "no candidate window's outputs were read"
    assert result.status == "rejected" and result.reward == 0.0, result.message
    stop = {f.code: f.reason for f in result.flags}.get("stop_escaped", "")
    assert "read its outputs" in stop, result.message


def test_the_look_before_a_read_is_on_the_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """The look at a runner's processes before its outputs are read lasts as long as the runner
    makes it (every task it keeps is swept), and work done while it lasts, before its own clock
    is read, is on no reading (red team round 10: 300–2000 zombies, a look of 0.2–1.3 s a
    window). Taken off the window, that was free time; it is the window's, on the clock."""
    from cudal1_evaluator.parent import conduct

    look, window = conduct.Conductor._look, conduct.Conductor._window
    walls: list[float] = []

    def slow_look(self: conduct.Conductor, side: str) -> object:
        if side == "candidate":
            time.sleep(0.25)  # as a runner with a thousand tasks to sweep makes it (a
            # window's own work is ~40 ms)
        return look(self, side)

    def record(self: conduct.Conductor, side: str, ids: list[int]) -> conduct.Burst:
        burst = window(self, side, ids)
        if side == "candidate" and ids and "candidate" in self.host.readers:
            walls.append(burst.wall_ms)
        return burst

    monkeypatch.setattr(conduct.Conductor, "_look", slow_look)
    monkeypatch.setattr(conduct.Conductor, "_window", record)
    candidate = LINEAR_PROBLEM.replace("class Model(", "class ModelNew(")
    result = evaluate(_job(LINEAR_PROBLEM, candidate))
    assert walls, result.message
    assert min(walls) >= 250.0, walls  # a lower bound: a busy host only adds to it


def test_windows_sized_from_a_sandbagged_round_are_sized_again_from_the_timed_ones() -> None:
    """Round 12: sleeping in the sizing round cut every side to four calls a window, where a
    cost a window pays once weighs four times as much on each call. Timed rounds whose sides
    want more than twice the calls they got are sized again from their own medians (and timed
    again); a sizing round within that is left alone."""
    from cudal1_evaluator.parent.conduct import undersized

    per_call = {"reference": 0.5, "candidate": 0.5}
    wanted = {"reference": 80, "candidate": 80}
    assert undersized(per_call, wanted, {"reference": 4, "candidate": 4}) == \
        {"reference": 80, "candidate": 80}
    assert undersized(per_call, wanted, {"reference": 40, "candidate": 40}) is None


def test_the_cap_holds_to_the_lower_alone_figure() -> None:
    """The alone phase is timed at the calls sized before the candidate exists; the timed
    windows may hold more, and a cost a window pays once then reads lower a call in them. The
    reference alone timed again at the timed size holds the cap when it reads lower; a
    candidate that slowed that second measurement leaves the first one in force."""
    from cudal1_evaluator.parent.conduct import Evidence

    ev = Evidence(alone=[Burst(31, 40.0, 8.0)] * 3, alone_sized=[Burst(291, 70.0, 8.0)] * 3)
    assert ev.alone_for_cap() is ev.alone_sized  # 0.21 ms a call against 1.03 ms
    ev.alone_sized = [Burst(291, 400.0, 8.0)] * 3  # slowed: 1.35 ms a call
    assert ev.alone_for_cap() is ev.alone
    inter = [Burst(291, 308.0, 8.0)] * 6  # the reference interleaved slowed fivefold
    capped = reference_means(Evidence(alone=ev.alone, alone_sized=[Burst(291, 70.0, 8.0)] * 3)
                             .alone_for_cap(), inter)
    assert statistics.median(capped) == pytest.approx(1.05 * 62.0 / 291)


def test_the_parents_helper_threads_wait_while_a_window_is_timed(tmp_path: Path) -> None:
    """Round 12: the parent's disk watch scans what the candidate wrote, when the OS schedules
    it; a candidate could move its scans into the reference's windows. Helper threads that
    work on what a candidate made wait at their evaluation's gate while it times a window;
    another evaluation's gate (another GPU's lane in the same process) holds them not."""
    import threading

    from cudal1_evaluator.parent import diskcap, window_gate

    for i in range(300):
        (tmp_path / f"f{i}").write_bytes(b"x")
    ours, theirs = window_gate.Gate(), window_gate.Gate()
    done = threading.Event()
    with ours.window():
        thread = threading.Thread(target=lambda: (diskcap.disk_use(tmp_path, ours),
                                                  done.set()))
        thread.start()
        assert not done.wait(0.5), "the scan ran while a window was timed"
    assert done.wait(5.0), "the scan did not resume once the window closed"
    thread.join()
    with theirs.window():
        assert diskcap.disk_use(tmp_path, ours).bytes > 0  # not held by another's window


def test_a_progress_line_that_nests_past_the_recursion_limit_is_ignored() -> None:
    from cudal1_evaluator.wire import channel

    assert channel.parse_progress(b"[" * 65536) is None
    assert channel.parse_progress(b'["timing", 1, 6, ""]') == ("timing", 1, 6, "")


def test_a_tree_deeper_than_the_recursion_limit_is_removed(tmp_path: Path) -> None:
    """Round 13: a candidate's 2000-level tree in its temp dir made the cleanup raise
    (``shutil.rmtree`` recurses), the evaluation read "cancelled" and the tree stayed."""
    import sys

    from cudal1_evaluator.isolation import lifetime

    root = deepest = tmp_path / "root"
    root.mkdir()
    for _ in range(sys.getrecursionlimit() + 200):  # pathlib's mkdir(parents=True) recurses
        deepest = deepest / "d"
        os.mkdir(deepest)
    (deepest / "f").write_bytes(b"x")
    lifetime.remove_tree(root)
    assert not root.exists()
    lifetime.remove_tree(root)  # gone already: nothing raised


def test_the_alone_windows_settle_before_they_are_kept() -> None:
    """A reference runner's first windows after its pool is made pay its first touches: on a
    2-core host three of them read 1.74, 1.03 and 0.52 ms a call against 0.41-0.46
    interleaved. Alone windows are kept once the last three agree within 25 % a call."""
    from cudal1_evaluator.parent.conduct import _agree

    warming = [Burst(24, 45.7, 4.0), Burst(24, 28.6, 4.0), Burst(24, 16.5, 4.0)]
    settled = [Burst(24, 15.0, 4.0), Burst(24, 14.2, 4.0), Burst(24, 15.6, 4.0)]
    assert not _agree(warming, 4.0)
    assert _agree(settled, 4.0)


def test_the_referee_makes_no_file_through_an_exchange_dir_swapped_for_a_link(
        tmp_path: Path) -> None:
    """Round 16: the runner owns the dir that holds its exchange dir; swapped for a link, the
    referee's pool files (GBs, root's) landed wherever it pointed. No step of the way to an
    evaluation's dir is followed once inside it."""
    from cudal1_evaluator.isolation.lifetime import TEMP_PREFIX

    own = tmp_path / f"{TEMP_PREFIX}runner"
    elsewhere = tmp_path / "elsewhere"
    (own / "real").mkdir(parents=True)
    elsewhere.mkdir()
    (own / "xchg").symlink_to(elsewhere)
    value = torch.ones(4)
    with pytest.raises(OSError):
        export(value, own / "xchg", torch.device("cpu"))
    assert list(elsewhere.iterdir()) == []
    shared, desc = export(value, own / "real", torch.device("cpu"))
    assert torch.equal(shared, value) and Path(str(desc["path"])).parent == own / "real"  # type: ignore[index]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_staged_fill_writes_what_a_slot_by_slot_fill_writes(tmp_path: Path) -> None:
    """The GPU fill on the clock is one copy of sets staged before it (``referee.Staging``):
    the arena then holds, bit for bit, what filling slot by slot gives, outputs poisoned."""
    from cudal1_evaluator.trusted.referee import Pool, Staging

    dev = torch.device("cuda")
    probe = [torch.randn(3, 5, device=dev), 7, torch.randint(0, 9, (11,), device=dev)]
    outs = [torch.zeros(4, 4, device=dev)]
    sets = [[torch.randn(3, 5, device=dev), 7, torch.randint(0, 9, (11,), device=dev)]
            for _ in range(3)]
    staged = Pool(probe, outs, 3, tmp_path, dev)
    assert staged.arena is not None
    # the referee's shared staging area, left over from another pool's sets
    area = torch.full((staged.arena.used + 4096,), 0xAB, dtype=torch.uint8, device=dev)
    staged.stage = Staging(staged, area)
    staged.stage.clear()
    plain = [staged.stage.put(j, s) for j, s in enumerate(sets)]
    staged.fill_staged(3)
    by_slot = Pool(probe, outs, 3, tmp_path, dev)
    assert plain == [by_slot.fill(j, s) for j, s in enumerate(sets)] == [[None, 7, None]] * 3
    torch.cuda.synchronize()
    assert staged.arena is not None and by_slot.arena is not None
    end = staged.ends[-1]
    assert torch.equal(staged.arena.bytes[:end], by_slot.arena.bytes[:end])
    assert torch.isnan(staged.outputs[2][0]).all()
