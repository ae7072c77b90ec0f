"""The real-world corpus: a well-formed manifest, every style covered, the gate's verdicts as
reviewed, and the batch comparison (ours and the independent harness) on a few CPU pairs."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from cudal1_tui.analysis.gate import check_candidate, rejected

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "benchmarks" / "corpus" / "manifest.toml"
PAIRS: list[dict[str, Any]] = tomllib.loads(MANIFEST.read_text(encoding="utf-8"))["pair"]
VERDICTS = {"ok", "incorrect", "rejected", "compile_error", "runtime_error"}
STYLES = {  # the shapes real model output takes (issue #11), each at least once
    "built_at_import", "lazy_init", "lazy_forward", "load_file", "temp_dir_write",
    "try_except_fallback", "wrong_api", "autograd_function", "cudnn_benchmark", "tf32",
    "eval_mode_switch", "bn_fold", "half_math", "bf16", "cuda_graphs", "static_output",
    "call_counter", "warmup_branch", "inplace_input", "inplace_intermediate", "own_get_inputs",
    "channels_last", "torch_compile", "torch_jit_script", "triton", "plain_pytorch",
    "algebraic",
    # issue 22: released model output
    "optional_build", "prints_in_fallback", "first_call_autotune", "precision_branch_unused",
    "microsecond", "conv_default_tf32", "import_settings",
}


def test_manifest_is_complete() -> None:
    assert len(PAIRS) >= 40
    assert len({p["name"] for p in PAIRS}) == len(PAIRS)
    for p in PAIRS:
        assert (ROOT / p["problem"]).is_file() and (ROOT / p["candidate"]).is_file(), p["name"]
        assert p["expected"] in VERDICTS and p.get("expected_cpu", "ok") in VERDICTS
        assert p["device"] in ("any", "cuda", "cpu") and p["gate"] in ("pass", "reject")
        assert isinstance(p["honest"], bool) and len(p["review"]) > 40
        ast.parse((ROOT / p["candidate"]).read_text(encoding="utf-8"))
    assert sum(p["honest"] for p in PAIRS) >= 10 and sum(not p["honest"] for p in PAIRS) >= 10


def test_every_style_is_covered() -> None:
    tags = {t for p in PAIRS for t in p["tags"]}
    assert tags >= STYLES, STYLES - tags


@pytest.mark.parametrize("pair", PAIRS, ids=[p["name"] for p in PAIRS])
def test_gate_verdict_as_reviewed(pair: dict[str, Any]) -> None:
    findings = check_candidate((ROOT / pair["candidate"]).read_text(encoding="utf-8"),
                               (ROOT / pair["problem"]).read_text(encoding="utf-8"))
    assert ("reject" if rejected(findings) else "pass") == pair["gate"], findings


def test_no_honest_correct_pair_is_rejected_by_the_gate() -> None:
    bad = [p["name"] for p in PAIRS if p["honest"] and p["expected"] == "ok"
           and p["gate"] == "reject"]
    assert bad == []


def test_batch_comparison_on_cpu(tmp_path: Path) -> None:
    out = tmp_path / "rows.json"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "compare_gpu.py"), str(MANIFEST),
         "--device", "cpu", "--only", "diag_broadcast", "relu_inplace_input",
         "--budget", "0.2", "--workers", "2", "--build-root", str(tmp_path / "builds"),
         "--out", str(out)],
        capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    payload = json.loads(out.read_text(encoding="utf-8"))
    assert payload["complete"] and payload["device"] == "cpu"
    rows = {r["name"]: r for r in payload["rows"]}
    assert set(rows) == {"diag_broadcast", "relu_inplace_input"}
    # one shared build root; the independent harness finds each pair's keyed dir by its key
    assert all(r["independent"]["reused_build"] for r in rows.values())
    honest = rows["diag_broadcast"]
    assert honest["ours"]["status"] == "ok" and honest["independent"]["status"] == "ok"
    assert honest["ours"]["speedup"] > 0 and honest["independent"]["speedup"] > 0
    assert honest["ratio"] is not None
    assert all(isinstance(side["at_floor"], bool) for side in honest["ours"]["timing"].values())
    mutating = rows["relu_inplace_input"]
    assert mutating["ours"]["status"] == "rejected" and mutating["as_expected"]
    assert mutating["independent"]["status"] == "ok"  # the simple harness does not look
    assert "pairs/min" in done.stdout
    notes = tmp_path / "notes.toml"
    notes.write_text('relu_inplace_input = "the simple harness does not check inputs"\n')
    report = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "agreement_table.py"), str(out),
         "--notes", str(notes)],
        capture_output=True, text=True, timeout=60, check=True).stdout
    assert "- pairs measured: 2," in report
    assert "| diag_broadcast | ok | ok | ok |" in report
    assert "- the candidate alone at its floor (our speedup marked ≥): " in report
    [mutating_line] = [ln for ln in report.splitlines() if ln.startswith("| relu_inplace_input")]
    assert mutating_line.endswith("| the simple harness does not check inputs |")
