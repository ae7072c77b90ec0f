"""The Ray backend on a local Ray instance on the CPU: the same jobs as Ray tasks give the
same verdicts as the local evaluator, and ``RAY_ADDRESS`` sends a headless run there.

Skipped where Ray is not installed (``pip install 'cudal1-tui[ray]'``; the ``dev`` extra has
it). Real Ray tasks, real evaluator subprocesses inside them.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_headless import GOOD, cli, env_for

from cudal1_evaluator.schema import TIMING_NOTES
from cudal1_tui.cluster.ray_backend import RayJudge, runtime_env, ship_tasks
from cudal1_tui.judging import JUDGE, make_job
from cudal1_tui.replay import ReplayConfig, ReplayServer, Reply

ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'cudal1-tui[ray]'")

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "benchmarks" / "corpus" / "candidates"
PAIRS = {  # corpus pairs that run on a CPU: honest, mutating its input, a C++ build
    "diag_broadcast": ("diag_matmul", "ok"),
    "relu_inplace_input": ("relu", "rejected"),
    "relu_cpp_lazy_forward": ("relu", "ok"),
}


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """A local Ray instance of 2 CPUs, owned by this test process; its GCS address."""
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env=runtime_env(), logging_level="WARNING")
    ship_tasks(ray)
    try:
        yield str(ray.get_runtime_context().gcs_address)
    finally:
        ray.shutdown()


def here(tmp: Path, *args: str) -> list[str]:
    """The headless command, run by this interpreter (the one that has Ray)."""
    return [sys.executable, "-m", "cudal1_tui", *cli(tmp, *args)[1:]]


def _job(problem: str, candidate: str, tmp: Path) -> Any:
    from cudal1_tui.problem.sizing import shrink_for_cpu

    source = shrink_for_cpu((ROOT / "examples" / f"{problem}.py").read_text())
    return make_job(source, (CORPUS / f"{candidate}.py").read_text(), device="cpu",
                    job_id=candidate, timing_budget_s=0.5, correctness_trials=2,
                    strict_threshold=1e6, build_dir=str(tmp / "build"))


def _verdict(judge: Any, job: Any) -> tuple[str, str, list[str]]:
    prepared = judge.gate(job)
    result = prepared.verdict or judge.evaluate(job, prepared)
    codes = sorted(f.code for f in result.flags if f.code not in TIMING_NOTES)
    return result.status, result.job_id, codes


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_ray_tasks_give_the_local_verdicts(cluster: str, pair: str, tmp_path: Path) -> None:
    problem, expected = PAIRS[pair]
    job = _job(problem, pair, tmp_path)
    there = _verdict(RayJudge(ray, gpus=False), job)
    assert there == _verdict(JUDGE, job)
    assert there[0] == expected and there[1] == pair


def test_ray_probe_matches_the_local_probe(cluster: str) -> None:
    from cudal1_evaluator.schema import ProbeJob
    from cudal1_tui.problem.sizing import shrink_for_cpu

    source = shrink_for_cpu((ROOT / "examples" / "relu.py").read_text())
    job = ProbeJob(problem_source=source, device="cpu", problem_name="relu",
                   timing_budget_s=0.3, timeout_s=300)
    remote, here = RayJudge(ray, gpus=False).probe(job), JUDGE.probe(job)
    assert remote.ok and here.ok
    assert remote.outputs == here.outputs and remote.inputs == here.inputs


def test_ray_address_sends_a_headless_run_to_the_cluster(cluster: str, tmp_path: Path) -> None:
    env = {**env_for(tmp_path), "RAY_ADDRESS": cluster}
    with ReplayServer(ReplayConfig(replies=(Reply(GOOD),))) as server:
        done = subprocess.run(
            here(tmp_path, str(ROOT / "examples" / "diag_matmul.py"), "--rounds", "1",
                "--sizes", "cpu", "--no-builtin", "--base-url", server.base_url),
            stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env, timeout=600,
            cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"evaluating on Ray cluster at {cluster}" in done.stderr
    session = next((tmp_path / "sessions").iterdir())
    trace = (session / "trace.jsonl").read_text().splitlines()
    assert len(trace) == 1 and '"status": "ok"' in trace[0]


def test_cluster_local_ignores_ray_address(tmp_path: Path) -> None:
    """``--cluster local`` keeps the run on this host even with RAY_ADDRESS set (an address
    where nothing listens: reaching for it would fail)."""
    env = {**env_for(tmp_path), "RAY_ADDRESS": "127.0.0.1:9"}
    done = subprocess.run(
        here(tmp_path, str(ROOT / "examples" / "diag_matmul.py"), "--rounds", "1", "--sizes",
            "cpu", "--no-builtin", "--cluster", "local", "--base-url", "http://127.0.0.1:9/v1"),
        stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env, timeout=300,
        cwd=tmp_path)
    assert "evaluating on CPU (one lane)" in done.stderr, done.stderr[-2000:]
