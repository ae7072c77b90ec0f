"""The issue-22 corpus pairs that run on a CPU, evaluated for real at their CPU sizes: each
verdict as the manifest says (``expected_cpu`` where given), and every correct one timed."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
from evaluator_cases import job

from cudal1_evaluator.launch import evaluate
from cudal1_tui.problem.sizing import shrink_for_cpu

ROOT = Path(__file__).resolve().parents[2]
PAIRS: list[dict[str, Any]] = tomllib.loads(
    (ROOT / "benchmarks" / "corpus" / "manifest.toml").read_text(encoding="utf-8"))["pair"]
ISSUE_22 = {"diag_optional_cpp_fallback", "matmul_first_call_autotune_fp32",
            "relu_cuda_graph_static_replay", "tiny_scale_shift_addcmul",
            "conv3x3_relu_default_tf32", "conv3x3_relu_channels_last_benchmark"}
CHOSEN = [p for p in PAIRS if p["name"] in ISSUE_22]


def test_every_issue_22_pair_is_in_the_manifest() -> None:
    assert {p["name"] for p in CHOSEN} == ISSUE_22


@pytest.mark.slow
@pytest.mark.parametrize("pair", CHOSEN, ids=[p["name"] for p in CHOSEN])
def test_issue_22_pair_on_cpu(pair: dict[str, Any], tmp_path: Path) -> None:
    problem = shrink_for_cpu((ROOT / pair["problem"]).read_text(encoding="utf-8"))
    candidate = (ROOT / pair["candidate"]).read_text(encoding="utf-8")
    result = evaluate(job(problem, candidate, tmp_path, strict_threshold=1e9))
    expected = pair.get("expected_cpu", pair["expected"])
    assert result.status == expected, result.message
    codes = {f.code for f in result.flags}
    assert result.speedup is not None and result.speedup > 0  # every correct one is timed
    assert "precision_lowered" not in codes and result.precision["candidate"] == "fp32"
    if pair["name"] == "diag_optional_cpp_fallback":
        assert "optional_build_failed" in codes
    if pair["name"] == "conv3x3_relu_channels_last_benchmark":
        assert "cudnn.benchmark" in result.precision["settings"]
