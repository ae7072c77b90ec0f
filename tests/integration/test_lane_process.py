"""Evaluations run in a lane process of their own, away from the app's threads
(``cudal1_tui.engine.lane_process``, ``cudal1_evaluator.lane``): real evaluations on the CPU,
a real lane process, killed and cancelled for real."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from cudal1_evaluator.lane import seal, unseal
from cudal1_evaluator.schema import ProbeJob, ProbeResult
from cudal1_tui.engine import lane_process
from cudal1_tui.judging import JUDGE, make_job

ROOT = Path(__file__).resolve().parents[2]
PROBLEM = (ROOT / "benchmarks/corpus/problems/tiny_scale_shift.py").read_text()
HONEST = PROBLEM.replace("class Model(", "class ModelNew(")
QUICK = {"device": "cpu", "correctness_trials": 2, "timing_budget_s": 1.0,
         "strict_threshold": 1e9}


def _hog(stop: threading.Event) -> None:
    while not stop.is_set():
        sum(range(2000))  # pure Python: holds the interpreter lock but for switches


def test_a_busy_thread_of_the_app_does_not_reach_the_clock() -> None:
    """Beside one Python thread that never sleeps, the conductor's clock used to wake up late
    on every call (a 0.21-0.24 ms call of this problem read 16-27 ms, a hundredfold); in the lane
    process it does not share this process's interpreter lock. The bound is loose: the busy
    thread still takes one of the host's cores."""
    stop = threading.Event()
    hog = threading.Thread(target=_hog, args=(stop,), daemon=True)
    hog.start()
    try:
        result = JUDGE.judge(make_job(PROBLEM, HONEST, **QUICK))
    finally:
        stop.set()
        hog.join()
    assert result.status == "ok", result.message
    medians = {side: summary.median_ms for side, summary in result.timing.items()}
    assert medians["reference"] < 5.0 and medians["candidate"] < 5.0, medians


def test_a_lane_that_dies_is_reported_not_scored_and_the_next_one_starts_afresh() -> None:
    """An infrastructure failure is no candidate's verdict: no reward-0 record for it."""
    seen = threading.Event()

    def on_progress(stage: str, *_: object) -> None:
        if stage in ("correctness", "timing"):
            seen.set()

    failures: list[BaseException] = []

    def judge() -> None:
        try:
            JUDGE.judge(make_job(PROBLEM, HONEST, **QUICK), on_progress=on_progress)
        except lane_process.LaneFailed as exc:
            failures.append(exc)

    worker = threading.Thread(target=judge)
    worker.start()
    assert seen.wait(300), "the evaluation never got going"
    victims = [lane for lanes in lane_process._LANES.values() for lane in lanes
               if id(lane) in lane_process._BUSY]
    assert len(victims) == 1 and victims[0]._proc is not None
    os.kill(victims[0]._proc.pid, signal.SIGKILL)
    worker.join(120)
    (failure,) = failures
    assert "evaluator's process for cpu ended while it worked (killed by signal 9)" in str(failure)
    assert "fix: `cudal1-tui doctor`" in str(failure)
    again = JUDGE.judge(make_job(PROBLEM, HONEST, **QUICK))
    assert again.status == "ok", again.message


FAKE_LANE = """
import json, sys
sys.stdout.buffer.write(b'{"ready": true}\\n'); sys.stdout.buffer.flush()
sys.stdin.buffer.readline()  # the key, which this stand-in does not know how to use
sys.stdin.buffer.readline()  # the request
sys.stdout.buffer.write(json.dumps({"id": 1, "result": "{}"}).encode() + b"\\n")
sys.stdout.buffer.flush()
sys.stdin.buffer.readline()
"""


def test_a_line_the_lane_did_not_seal_ends_the_lane_and_is_never_believed() -> None:
    """What another process of the user wrote into the channel (where no sandbox layer hides
    the app: no PID namespace, no ``nobody``) is no result: the lane is killed, the request
    fails. A real process over a real socket, standing in for a lane that was tampered with."""
    lane = lane_process.LaneProcess("cpu", command=[sys.executable, "-c", FAKE_LANE])
    with pytest.raises(lane_process.LaneFailed, match="did not seal"):
        lane.ask("probe", "{}", silence_s=60)
    assert lane._proc is not None and lane._proc.wait(10) == -signal.SIGKILL


def _stand_in(after_key: str) -> lane_process.LaneProcess:
    """A lane stand-in: ready, reads its key, then does ``after_key`` (a real process)."""
    script = ("import sys, time\n"
              "sys.stdout.buffer.write(b'{\"ready\": true}\\n'); sys.stdout.buffer.flush()\n"
              "sys.stdin.buffer.readline()\n" + after_key)
    return lane_process.LaneProcess("cpu", command=[sys.executable, "-c", script])


def test_a_lane_that_dies_with_a_request_unread_fails_the_request_at_once() -> None:
    """Its end of the socket closes with our bytes unread: our read gets a reset, not an end
    of file, and must still end the request (it used to leave the reader thread dead)."""
    lane = _stand_in("time.sleep(1.0)\n")  # exits without reading the request
    started = time.monotonic()
    gone = r"ended while it worked|connection reset|could not be asked"
    with pytest.raises(lane_process.LaneFailed, match=gone):
        lane.ask("probe", "x" * 300_000, silence_s=120)
    assert time.monotonic() - started < 30


def test_a_silent_lane_is_killed_after_the_requests_silence_limit() -> None:
    lane = _stand_in("sys.stdin.buffer.readline()\ntime.sleep(600)\n")
    with pytest.raises(lane_process.LaneFailed, match="said nothing for 2 s; killed"):
        lane.ask("probe", "{}", silence_s=2)


def test_the_channel_cannot_be_reopened_through_proc() -> None:
    """A pipe's end can be opened again through ``/proc/<pid>/fd`` by another process of the
    user (round 32 wrote forged results so); the lane's channel is a socket, which cannot."""
    lane = lane_process.LaneProcess("cpu")
    try:
        ProbeResult.from_json(lane.ask("probe", ProbeJob(problem_source=PROBLEM).to_json()))
        assert lane._channel is not None
        with pytest.raises(OSError):
            os.open(f"/proc/self/fd/{lane._channel.fileno()}", os.O_WRONLY)
    finally:
        lane.close()


def test_a_lane_answers_what_it_was_asked_after_sealed_requests() -> None:
    lane = lane_process.LaneProcess("cpu")
    try:
        job = ProbeJob(problem_source=PROBLEM, problem_name="sealed")
        result = ProbeResult.from_json(lane.ask("probe", job.to_json(), silence_s=300))
        assert result.ok, result.message
    finally:
        lane.close()


def test_a_sealed_line_fails_to_open_when_anything_in_it_changed() -> None:
    key = b"k" * 32
    line = seal(key, {"id": 1, "result": "{}"})
    assert unseal(key, line) == {"id": 1, "result": "{}"}
    assert unseal(b"x" * 32, line) is None
    assert unseal(key, line.replace(b'\\"id\\": 1', b'\\"id\\": 2')) is None
    assert unseal(key, b"not json") is None


def test_a_cancel_reaches_the_evaluation_in_the_lane() -> None:
    cancel = threading.Event()
    started = time.monotonic()

    def on_progress(stage: str, *_: object) -> None:
        if stage == "correctness":
            cancel.set()

    result = JUDGE.evaluate(make_job(PROBLEM, HONEST, **{**QUICK, "timing_budget_s": 30.0}),
                            JUDGE.gate(make_job(PROBLEM, HONEST)), on_progress=on_progress,
                            cancel=cancel)
    assert cancel.is_set()
    assert result.status != "ok"
    assert time.monotonic() - started < 90  # not the 60 s of timing it was asked for, and more
    probe = JUDGE.probe(ProbeJob(problem_source=PROBLEM, problem_name="after-cancel"))
    assert probe.ok, probe.message  # the lane serves on


def test_the_lane_answers_bad_requests_and_ends_at_a_line_it_cannot_open() -> None:
    ours, theirs = socket.socketpair()
    lane = subprocess.Popen([sys.executable, "-m", "cudal1_evaluator", "lane", "--no-warm"],
                            stdin=theirs.fileno(), stdout=theirs.fileno(), cwd=ROOT)
    theirs.close()
    replies = ours.makefile("rb")
    assert json.loads(replies.readline()) == {"ready": True}
    key = os.urandom(32)
    ours.sendall(json.dumps({"key": key.hex()}).encode() + b"\n" + b"".join([
        seal(key, {"id": 1, "op": "nope", "job": "{}"}),
        seal(key, {"id": 2, "op": "evaluate"}),
        seal(key, {"id": 3, "op": "evaluate", "job": "{\"bad\": 1}"})]))
    answers = [unseal(key, replies.readline()) for _ in range(3)]
    assert [a and a["id"] for a in answers] == [1, 2, 3]
    assert answers[0] and "unknown op 'nope'" in answers[0]["error"]
    assert answers[1] and "no job" in answers[1]["error"]
    assert answers[2] and "malformed evaluate job" in answers[2]["error"]
    ours.sendall(seal(b"another key", {"id": 4, "op": "probe", "job": "{}"}))
    assert lane.wait(60) == 3  # it ended by itself, at once: the channel was not only ours
    assert replies.readline() == b""
    ours.close()
