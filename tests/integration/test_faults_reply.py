"""A 10 MB reply is cut to the cap and recorded as cut within seconds; Ctrl-C on a run that
is taking such a reply in ends it within 2 s."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

from fault_runs import Run, command, reply

from cudal1_tui.replay import ReplayConfig, ReplayServer, Reply

# A model talking in circles before its answer: the code lies beyond the cap.
HUGE = "Let me check it again. " * 460_000 + "\n" + reply()


def _huge_run(tmp: Path, server: ReplayServer) -> Run:
    return Run.start(tmp, command(tmp, "diag_matmul.py", "--no-builtin", "--rounds", "1",
                                  "--base-url", server.base_url),
                     CUDAL1_MAX_TOKENS="100000000")  # the replay server honours max_tokens


def test_a_10_mb_reply_is_recorded_as_cut_within_10_s(tmp_path: Path) -> None:
    assert len(HUGE) > 10_000_000
    with ReplayServer(ReplayConfig(replies=(Reply(HUGE),), chunk_chars=1 << 20)) as server:
        run = _huge_run(tmp_path, server)
        assert run.wait_for("slot 0: generating", 150), run.output()
        started = time.monotonic()
        assert run.wait_for("cut to its first 256 KB", 60), run.output()
        took = time.monotonic() - started
        assert run.wait_for("slot 0: r001s0-", 150), run.output()  # evaluated, recorded
        run.proc.wait(timeout=60)
    assert took < 10, f"the reply took {took:.1f} s from its first byte to its cut"
    trace = next((tmp_path / "sessions").iterdir()) / "trace.jsonl"
    row = json.loads(trace.read_text().splitlines()[0])
    assert row["usage"]["reply_cut"]["content_chars"] == len(HUGE)
    assert len(row["raw_response"]) == 256 * 1024
    assert row["status"] == "rejected" and "no python code" in row["parse_error"]


def test_ctrl_c_while_a_huge_reply_comes_in_ends_the_run_within_2_s(tmp_path: Path) -> None:
    slow = ReplayConfig(replies=(Reply(HUGE),), chunk_chars=1 << 16, latency_s=0.05)
    with ReplayServer(slow) as server:
        run = _huge_run(tmp_path, server)
        assert run.wait_for("slot 0: generating", 150), run.output()
        time.sleep(1.0)
        sent = time.monotonic()
        run.proc.send_signal(signal.SIGINT)
        run.proc.wait(timeout=30)
        took = time.monotonic() - sent
    assert run.proc.returncode == 130, run.output()
    assert took < 2.0, f"Ctrl-C took {took:.1f} s"


def test_a_run_whose_every_model_call_failed_exits_1(tmp_path: Path) -> None:
    failing = ReplayConfig(replies=(Reply(reply()),), fail_rate=1.0)
    with ReplayServer(failing) as server:
        run = _huge_run(tmp_path, server)
        run.proc.wait(timeout=240)
    assert run.wait_for("round 1 done", 1), run.output()
    assert run.proc.returncode == 1, run.output()
    assert "the run produced no candidate" in run.output()
    assert "Traceback" not in run.output()
