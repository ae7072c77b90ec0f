"""``cudal1-tui run ... --headless`` as a user runs it: a subprocess with no stdin and no TTY."""

from __future__ import annotations

import os
import signal
import subprocess
import textwrap
import time
from pathlib import Path

from cudal1_tui.replay import ReplayConfig, ReplayServer, Reply

ROOT = Path(__file__).resolve().parents[2]
PROBLEM = ROOT / "examples" / "diag_matmul.py"

GOOD = textwrap.dedent('''\
    ## Performance Analysis
    A dense GEMM against a diagonal matrix wastes O(n^2 m) work.

    ## Algorithm Design
    Scale the rows of b by a with a broadcast multiply.

    ## Code Implementation
    ```python
    import torch
    import torch.nn as nn


    class ModelNew(nn.Module):
        def __init__(self):
            super().__init__()

        def forward(self, a, b):
            return a.unsqueeze(-1) * b
    ```
    ''')


def env_for(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CUDAL1_", "OPENAI_"))}
    env.update(CUDAL1_CONFIG=str(tmp / "absent.toml"), CUDAL1_BUILD_DIR=str(tmp / "build"),
               CUDAL1_TIMING_BUDGET_S="1", CUDAL1_CORRECTNESS_TRIALS="2",
               CUDAL1_STRICT_THRESHOLD="1000000", CUDAL1_RETRIES="0",
               CUDAL1_CANDIDATES_PER_ROUND="1")
    return env


def cli(tmp: Path, *args: str) -> list[str]:
    return ["cudal1-tui", "run", *args, "--headless", "--sessions-dir", str(tmp / "sessions"),
            "--device", "cpu"]


def test_headless_round_prints_progress_and_summary(tmp_path: Path) -> None:
    with ReplayServer(ReplayConfig(replies=(Reply(GOOD),))) as server:
        done = subprocess.run(
            cli(tmp_path, str(PROBLEM), "--rounds", "1", "--sizes", "cpu", "--no-builtin",
                "--base-url", server.base_url),
            stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env_for(tmp_path),
            timeout=240, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    sessions = list((tmp_path / "sessions").iterdir())
    assert len(sessions) == 1
    # The summary table on stdout: problem, candidates, ok, best, source, session path.
    assert "cudal1-tui run summary" in done.stdout
    assert "diag_matmul" in done.stdout and str(sessions[0]) in done.stdout
    row = next(line for line in done.stdout.splitlines() if "diag_matmul" in line)
    assert [c.strip() for c in row.split("│")[2:3]] == ["1"]  # one candidate
    # Progress on stderr: stage, round, candidate, tokens/s.
    assert "round 1: 1 candidate(s)" in done.stderr
    assert "tok/s" in done.stderr and "slot 0: generating" in done.stderr
    assert "model" in done.stderr and "round 1 done" in done.stderr
    trace = (sessions[0] / "trace.jsonl").read_text().splitlines()
    assert len(trace) == 1


def test_headless_bad_problem_exits_1_with_a_message(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\n\nclass Model:\n    pass\n")
    done = subprocess.run(cli(tmp_path, str(bad), "--rounds", "1", "--base-url",
                              "http://127.0.0.1:9/v1"),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          env=env_for(tmp_path), timeout=120, cwd=tmp_path)
    assert done.returncode == 1
    assert "error:" in done.stderr and "Traceback" not in done.stderr
    assert "get_inputs" in done.stderr  # the message names what is missing


def test_headless_ctrl_c_exits_130_and_keeps_the_session(tmp_path: Path) -> None:
    slow = ReplayConfig(replies=(Reply(GOOD),), latency_s=0.2, chunk_chars=2)
    with ReplayServer(slow) as server:
        child = subprocess.Popen(
            cli(tmp_path, str(PROBLEM), "--rounds", "3", "--sizes", "cpu", "--no-builtin",
                "--base-url", server.base_url),
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=env_for(tmp_path), cwd=tmp_path)
        deadline = time.monotonic() + 120
        while not server.requests and time.monotonic() < deadline:
            time.sleep(0.1)  # wait until the model is streaming
        assert server.requests, "the run never asked the model"
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=60)
    assert child.returncode == 130, err
    assert "session is saved" in err and "Traceback" not in err
    session = next((tmp_path / "sessions").iterdir())
    assert (session / "session.json").is_file() and (session / "trace.jsonl").read_text() == ""
    assert "diag_matmul" in out  # the summary still prints
