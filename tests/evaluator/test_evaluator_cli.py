"""``cudal1-tui eval`` and ``python -m cudal1_evaluator``: real processes, JSON out, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from evaluator_cases import LINEAR_HONEST, LINEAR_PROBLEM, job, linear_candidate

from cudal1_evaluator.schema import Result


def _files(tmp_path: Path, candidate: str) -> tuple[Path, Path]:
    problem, cand = tmp_path / "problem.py", tmp_path / "cand.py"
    problem.write_text(LINEAR_PROBLEM)
    cand.write_text(candidate)
    return problem, cand


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cudal1_tui", "eval", *args],
                          capture_output=True, text=True, timeout=300, check=False)


def test_eval_json_for_a_failing_candidate_exits_1(tmp_path: Path) -> None:
    addmm = "torch.addmm(self.fc.bias, x, self.fc.weight.t())"
    wrong = LINEAR_HONEST.replace(f"torch.clamp_min({addmm}, 0.0)", addmm)  # no relu
    assert wrong != LINEAR_HONEST
    problem, cand = _files(tmp_path, wrong)
    done = _cli(str(problem), str(cand), "--json", "--trials", "2", "--budget", "0.3",
                "--build-dir", str(tmp_path / "b"))
    assert done.returncode == 1, done.stderr  # the result is not ok (the JSON is still there)
    result = Result.from_json(done.stdout)
    assert result.status == "incorrect" and result.reward == 0.0 and not result.correct
    raw = json.loads(done.stdout)
    assert raw["trials"][0]["ok"] is False and raw["trials"][0]["max_abs_err"] > 0


def test_eval_summary_for_an_honest_candidate(tmp_path: Path) -> None:
    problem, cand = _files(tmp_path, LINEAR_HONEST)
    done = _cli(str(problem), str(cand), "--trials", "2", "--budget", "0.3",
                "--build-dir", str(tmp_path / "b"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok") and "speedup" in done.stdout
    assert "reference_pristine" in done.stdout


def test_eval_usage_errors_exit_2(tmp_path: Path) -> None:
    problem, cand = _files(tmp_path, LINEAR_HONEST)
    missing = _cli(str(problem), str(tmp_path / "nope.py"), "--json")
    assert missing.returncode == 2 and "does not exist" in missing.stderr
    assert "Traceback" not in missing.stderr
    bad_device = _cli(str(problem), str(cand), "--device", "tpu")
    assert bad_device.returncode == 2 and "device 'tpu' is not one of" in bad_device.stderr


def test_static_gate_rejects_before_running(tmp_path: Path) -> None:
    header = "import subprocess\n"
    body = '        subprocess.run(["true"])\n        return torch.relu(self.fc(x))'
    problem, cand = _files(tmp_path, linear_candidate(body, header))
    done = _cli(str(problem), str(cand), "--json")
    assert done.returncode == 1, done.stderr  # not ok: exit 1, the JSON result still printed
    result = Result.from_json(done.stdout)
    assert result.status == "rejected" and result.reward == 0.0
    assert result.timing == {} and any(f.code.startswith("static.") for f in result.flags)


def test_python_m_evaluator_run_prints_the_result(tmp_path: Path) -> None:
    job_path = tmp_path / "job.json"
    job_path.write_text(job(LINEAR_PROBLEM, LINEAR_HONEST, tmp_path / "b").to_json())
    done = subprocess.run([sys.executable, "-m", "cudal1_evaluator", "run", str(job_path)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert Result.from_json(done.stdout).status == "ok"
    bad = tmp_path / "bad.json"
    bad.write_text('{"nothing": 1}')
    done = subprocess.run([sys.executable, "-m", "cudal1_evaluator", "run", str(bad)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and "bad job file" in done.stderr


def test_python_m_evaluator_reference_times_the_reference_alone(tmp_path: Path) -> None:
    job_path = tmp_path / "job.json"
    job_path.write_text(job(LINEAR_PROBLEM, "this candidate is never imported").to_json())
    done = subprocess.run([sys.executable, "-m", "cudal1_evaluator", "reference", str(job_path)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["n"] >= 5 and summary["median_ms"] > 0 and summary["clock"] == "perf_counter"


def test_python_m_evaluator_build_imports_and_caches(tmp_path: Path) -> None:
    from cudal1_evaluator.schema import BuildOutcome

    job_path = tmp_path / "job.json"
    job_path.write_text(job(LINEAR_PROBLEM, LINEAR_HONEST, tmp_path / "b",
                            cuda_arch="9.0").to_json())
    outcomes = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-m", "cudal1_evaluator", "build", str(job_path)],
                              capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stderr
        outcomes.append(BuildOutcome.from_dict(json.loads(done.stdout)))
    assert outcomes[0].ok and outcomes[0].status == "ok" and not outcomes[0].cached
    assert outcomes[1].ok and outcomes[1].cached
