"""Every example passes inspection, and the isolated probe on CPU at its ``# cpu-sizes``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cudal1_tui.problem.inspect import inspect_source
from cudal1_tui.problem.sizing import cpu_sizes, shrink_for_cpu

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
FILES = sorted(EXAMPLES.glob("*.py"))
NAMES = [p.name for p in FILES]


def test_at_least_ten_examples_all_in_the_readme() -> None:
    assert len(FILES) >= 10
    readme = (EXAMPLES / "README.md").read_text()
    for name in NAMES:
        assert f"`{name}`" in readme, f"{name} is missing from examples/README.md"


@pytest.mark.parametrize("name", NAMES)
def test_example_passes_inspection(name: str) -> None:
    source = (EXAMPLES / name).read_text()
    inspection = inspect_source(source, name)
    assert inspection.ok and not inspection.warnings, inspection.report()
    assert inspection.docstring, "say what it computes in a docstring"
    assert inspection.forward is not None and inspection.forward.params
    sizes, small = inspection.size_values(), cpu_sizes(source)
    assert small, "declare `# cpu-sizes: NAME=value, ...`"
    for size_name, value in small.items():
        assert value <= sizes[size_name], f"{size_name} grows at cpu sizes"
    assert inspect_source(shrink_for_cpu(source), name).size_values() == {**sizes, **small}


@pytest.fixture(scope="module")
def cpu_probes() -> dict[str, dict[str, Any]]:
    """One ``cudal1-tui inspect --json examples/*.py``: on CPU it probes at the CPU sizes."""
    done = subprocess.run(
        [sys.executable, "-m", "cudal1_tui", "inspect", "--json", *map(str, FILES)],
        capture_output=True, text=True, timeout=600)
    assert done.returncode in (0, 1), done.stderr
    return {Path(r["path"]).name: r for r in json.loads(done.stdout)}


@pytest.mark.parametrize("name", NAMES)
def test_example_probe_on_cpu(name: str, cpu_probes: dict[str, dict[str, Any]]) -> None:
    report = cpu_probes[name]
    probe = report["probe"]
    assert report["ok"], probe["message"] if probe else report
    assert report["probed_sizes"] == cpu_sizes((EXAMPLES / name).read_text())
    assert probe["outputs"] and all(o["dtype"] == "float32" for o in probe["outputs"])
    assert all(i["dtype"] in ("float32", "int64") for i in probe["inputs"])
    assert probe["input_sensitivity"] > 1e-4
    assert 0 < probe["reference_time_ms"] < 500  # CPU sizes stay well under half a second


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(subprocess.run([sys.executable, "-c", "import torch, sys; "
                                    "sys.exit(not torch.cuda.is_available())"]).returncode != 0,
                    reason="needs a CUDA GPU")
@pytest.mark.parametrize("name", NAMES)
def test_example_probe_on_gpu_at_full_size(name: str) -> None:
    from cudal1_tui.problem.probing import probe_problem

    result = probe_problem(EXAMPLES / name, "cuda", timing_budget_s=1.0)
    assert result.ok, result.message
    assert result.reference_time_ms is not None and result.reference_time_ms < 100
