"""The wheel works outside the checkout: build it, install it in a fresh venv, run it."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv holding only our wheel; its dependencies are the test environment's own (a
    ``.pth`` names that site-packages: the base interpreter's site may lack them)."""
    work = tmp_path_factory.mktemp("wheel")
    dist = work / "dist"
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist)],
        cwd=ROOT, check=True, capture_output=True, text=True,
    )
    (wheel,) = dist.glob("cudal1_tui-*.whl")
    env_dir = work / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    (site,) = (env_dir / "lib").glob("python*/site-packages")
    deps = dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))
    (site / "test_dependencies.pth").write_text("\n".join(deps) + "\n", encoding="utf-8")
    python = env_dir / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
         "--no-index", "-q", str(wheel)],
        check=True, capture_output=True, text=True,
    )
    return env_dir


def run_installed(env_dir: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["OPENAI_BASE_URL"] = "http://127.0.0.1:9/v1"  # nothing listens: doctor must say so
    return subprocess.run([str(env_dir / "bin" / "cudal1-tui"), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_wheel_carries_the_prompts_and_evaluator(installed: Path, tmp_path: Path) -> None:
    code = (
        "import cudal1_tui, cudal1_evaluator, pathlib;"
        "p = pathlib.Path(cudal1_tui.__file__).parent / '_prompts';"
        "print(cudal1_tui.__file__); print(sorted(x.name for x in p.iterdir()));"
        "print(cudal1_evaluator.__file__)"
    )
    out = subprocess.run([str(installed / "bin" / "python"), "-c", code], cwd=tmp_path,
                         capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[0].startswith(str(installed)), out
    assert "contrastive.md" in out[1] and "system.md" in out[1]
    assert out[2].startswith(str(installed))


def test_help_from_the_installed_wheel(installed: Path, tmp_path: Path) -> None:
    result = run_installed(installed, "--help", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    for command in ("run", "eval", "doctor", "export", "sessions", "show", "config"):
        assert command in result.stdout
    version = run_installed(installed, "--version", cwd=tmp_path)
    assert version.stdout.startswith("cudal1-tui 0.")


def test_doctor_from_the_installed_wheel(installed: Path, tmp_path: Path) -> None:
    result = run_installed(installed, "doctor", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    import json

    checks = {c["name"]: c for c in json.loads(result.stdout)}
    assert checks["torch"]["status"] == "ok"
    assert checks["model server"]["status"] == "warn"
    assert "OPENAI_BASE_URL" in checks["model server"]["fix"]
    assert {"python", "gpu", "nvcc", "ninja", "host compiler", "config", "sessions"} <= set(checks)
