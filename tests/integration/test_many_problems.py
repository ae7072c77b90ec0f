"""Many problems in one headless run, and several timing lanes at once.

Real evaluator subprocesses on the CPU, replies from the real replay server over HTTP (keyed
by a line of each problem, so each problem's prompt gets its own candidate).
"""

from __future__ import annotations

import json
import subprocess
import textwrap
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from test_headless import cli, env_for

from cudal1_tui.config import Settings
from cudal1_tui.engine.engine import Engine
from cudal1_tui.engine.fleet import Fleet
from cudal1_tui.engine.lanes import EVALUATION, Lane, OnWait, SlotLanes
from cudal1_tui.judging import JUDGE
from cudal1_tui.replay import ReplayConfig, ReplayServer, Reply

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def reply(code: str, key: str) -> Reply:
    body = textwrap.dedent(code)
    return Reply(content="## Performance Analysis\nOne pass.\n\n## Algorithm Design\nFuse.\n\n"
                 f"## Code Implementation\n```python\n{body}```\n", key=key)


DIAG_OK = reply('''\
    import torch
    import torch.nn as nn


    class ModelNew(nn.Module):
        def __init__(self):
            super().__init__()

        def forward(self, a, b):
            return a.unsqueeze(-1) * b
    ''', "torch.diag(a) @ b")
DIAG_WRONG = reply('''\
    import torch
    import torch.nn as nn


    class ModelNew(nn.Module):
        def __init__(self):
            super().__init__()

        def forward(self, a, b):
            return a.unsqueeze(-1) * b + 1.0
    ''', "torch.diag(a) @ b")
RELU_OK = reply('''\
    import torch
    import torch.nn as nn


    class ModelNew(nn.Module):
        def __init__(self):
            super().__init__()

        def forward(self, x):
            return torch.clamp_min(x, 0.0)
    ''', "torch.relu(x)")


def test_a_folder_of_problems_with_a_broken_one(tmp_path: Path) -> None:
    problems = tmp_path / "problems"
    problems.mkdir()
    for name in ("diag_matmul", "relu"):
        (problems / f"{name}.py").write_text((EXAMPLES / f"{name}.py").read_text())
    (problems / "broken.py").write_text("import torch\n\nclass Model:\n    pass\n")
    report = tmp_path / "report.json"
    with ReplayServer(ReplayConfig(replies=(DIAG_OK, DIAG_WRONG, RELU_OK))) as server:
        env = {**env_for(tmp_path), "CUDAL1_CANDIDATES_PER_ROUND": "2"}
        done = subprocess.run(
            cli(tmp_path, str(problems), "--rounds", "1", "--sizes", "cpu", "--no-builtin",
                "--base-url", server.base_url, "--report-json", str(report)),
            stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env, timeout=600,
            cwd=tmp_path)
        asked = len(server.requests)
    # the broken file is reported under its name, the two others ran: exit 1, no traceback
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    broken = [line for line in done.stderr.splitlines()
              if "broken.py:" in line and "error:" in line]
    assert broken and "get_inputs" in done.stderr  # compiler-style: the file names the problem
    assert asked == 4  # two slots per problem
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:-1]]
            for line in done.stdout.splitlines() if line.startswith("│")
            and line.split("│")[1].strip()}
    assert rows["diag_matmul"][:2] == ["2", "1"] and rows["relu"][:2] == ["2", "2"]
    assert rows["broken"][0] == "—" and "error:" in rows["broken"][-1]
    assert "candidate(s) in" in done.stdout and "bottleneck:" in done.stdout
    sessions = sorted(p.name.split("_", 2)[-1].rsplit("_", 1)[0]
                      for p in (tmp_path / "sessions").iterdir())
    assert sessions == ["diag_matmul", "relu"]  # one session per problem, none for the broken
    # progress lines name their problem
    assert "diag_matmul slot 1:" in done.stderr and "relu slot 0:" in done.stderr
    data = json.loads(report.read_text())
    assert data["candidates"] == 4 and data["where"] == "CPU (one lane)"
    assert sorted((o["problem"], o["status"]) for o in data["outcomes"]) == [
        ("diag_matmul", "incorrect"), ("diag_matmul", "ok"), ("relu", "ok"), ("relu", "ok")]
    assert data["per_minute"] > 0 and data["lanes"][0]["device"] == "cpu"
    assert data["lanes"][0]["holds"] == 6  # two probes and four evaluations, one at a time
    assert data["lanes"][0]["holds_by_kind"] == {"probe": 2, "evaluation": 4}
    by_kind = data["lanes"][0]["busy_s_by_kind"]
    assert by_kind["probe"] > 0 and by_kind["evaluation"] > 0
    assert abs(sum(by_kind.values()) - data["lanes"][0]["busy_s"]) < 0.01
    spread = data["evaluation_s"]  # each evaluation's own wall time
    assert spread["n"] == 4 and 0 < spread["median"] <= spread["p90"] <= spread["max"]


class CountingLanes(SlotLanes):
    """Slot lanes that count how many are held at once."""

    def __init__(self, width: int) -> None:
        super().__init__(width, "cpu")
        self.now = self.peak = 0
        self._count = threading.Lock()

    @contextmanager
    def hold(self, holder: str, on_wait: OnWait | None = None,
             cancel: threading.Event | None = None, kind: str = EVALUATION
             ) -> Iterator[Lane | None]:
        with super().hold(holder, on_wait, cancel, kind) as lane:
            with self._count:
                self.now += 1
                self.peak = max(self.peak, self.now)
            try:
                yield lane
            finally:
                with self._count:
                    self.now -= 1


def test_two_lanes_evaluate_at_once_and_keep_verdicts_apart(tmp_path: Path) -> None:
    """Two lanes (both on the CPU here: slots, no device lock) shared by two engines: the
    evaluations overlap, and each record holds its own candidate's verdict."""
    lanes = CountingLanes(2)
    fleet = Fleet(lanes, JUDGE, "cpu", "two test lanes")
    settings = Settings(device="cpu", candidates_per_round=2, timing_budget_s=1.0,
                        correctness_trials=2, strict_threshold=1e6, retries=0,
                        sessions_dir=str(tmp_path / "sessions"), use_builtin=False)
    with ReplayServer(ReplayConfig(replies=(DIAG_OK, DIAG_WRONG, RELU_OK))) as server:
        settings.base_url = server.base_url
        engines = [Engine(EXAMPLES / f"{n}.py", settings, emit=lambda _: None, sizes="cpu",
                          fleet=fleet) for n in ("diag_matmul", "relu")]
        threads = [threading.Thread(target=_one_round, args=(e,)) for e in engines]
        started = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join(600)
        elapsed = time.monotonic() - started
        verdicts = {e.problem_name: sorted((r.status, r.result.job_id == r.record_id)
                                           for r in e.records()) for e in engines}
        for e in engines:
            e.close()
    fleet.close()
    assert verdicts == {"diag_matmul": [("incorrect", True), ("ok", True)],
                        "relu": [("ok", True), ("ok", True)]}
    assert lanes.peak == 2, "the two lanes never timed at once"
    usage = fleet.usage()
    assert sum(u.evaluations for u in usage) == 6 and all(u.evaluations for u in usage)
    assert sum(u.busy_s for u in usage) > elapsed * 0.5  # more lane time than one lane had


def _one_round(engine: Engine) -> None:
    engine.open()
    engine.run_round()


def test_scaling_benchmark_dry_run_on_cpu(tmp_path: Path) -> None:
    """benchmarks/scaling.py end to end on one CPU lane: a real headless run on a corpus
    problem, its report read back and tabled (the GPU widths run the same code)."""
    import sys

    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "scaling.py"), "--device", "cpu",
         "--widths", "1", "--problems", "1", "--candidates", "1", "--out", str(out)],
        capture_output=True, text=True, timeout=600, cwd=tmp_path, check=False,
        env={**env_for(tmp_path), "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-3000:]
    saved = json.loads((out / "scaling.json").read_text())
    assert saved["1"]["candidates"] == 1 and saved["1"]["where"] == "CPU (one lane)"
    row = next(ln for ln in done.stdout.splitlines() if ln.startswith("| 1 |"))
    assert "1.00×" in row and "1/1" in row  # its own baseline: same verdicts
    assert (out / "run-1.log").is_file()
