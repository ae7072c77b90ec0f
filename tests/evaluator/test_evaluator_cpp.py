"""C++ candidates on CPU: real g++/ninja builds through load_inline, cached by source.

Three real builds in the module (one good, one broken, one build-only); the re-evaluations
reuse them.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from evaluator_cases import DIAG_PROBLEM, job

from cudal1_evaluator.launch import build, evaluate
from cudal1_evaluator.schema import BuildOutcome, Result

CPP_CANDIDATE = r'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SOURCE = """
torch::Tensor scale_rows(torch::Tensor a, torch::Tensor b) {
    auto A = a.contiguous();
    auto B = b.contiguous();
    auto out = torch::empty_like(B);
    const float* pa = A.data_ptr<float>();
    const float* pb = B.data_ptr<float>();
    float* po = out.data_ptr<float>();
    const int64_t n = B.size(0), m = B.size(1);
    for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < m; ++j)
            po[i * m + j] = pa[i] * pb[i * m + j];
    return out;
}
"""

ext = load_inline(name="scale_rows", cpp_sources=SOURCE, functions=["scale_rows"],
                  extra_cflags=["-O2"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return ext.scale_rows(A, B)
'''

# Same extension name as the good one: the keyed build dir keeps them apart.
BROKEN_CANDIDATE = CPP_CANDIDATE.replace("auto out = torch::empty_like(B);",
                                         "auto out = torch::empty_like(B)\n    undeclared_thing();")


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("builds")


@pytest.fixture(scope="module")
def first(build_dir: Path) -> tuple[Result, float]:
    started = time.monotonic()
    result = evaluate(job(DIAG_PROBLEM, CPP_CANDIDATE, build_dir, strict_threshold=1e9,
                          timeout_s=400.0))
    return result, time.monotonic() - started


def test_cpp_load_inline_candidate_compiles_and_is_ok(first: tuple[Result, float]) -> None:
    result, _ = first
    assert result.status == "ok", result.message + result.compile_log
    assert not result.build_cached and result.compile_time_s > 1.0
    # measured, not a number asserted: on a loaded 2-core host this O(N^2) kernel against the
    # O(N^3) reference read 1.69x (benchmarks print speedups; tests do not time)
    assert result.speedup is not None and result.speedup > 0


def _built(build_dir: Path) -> dict[Path, tuple[int, int]]:
    """The objects and libraries under ``build_dir``, each with its inode and mtime."""
    return {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in build_dir.rglob("*")
            if p.suffix in (".o", ".so") and p.is_file()}


def test_re_evaluation_compiles_nothing(first: tuple[Result, float], build_dir: Path) -> None:
    result_first, _ = first
    built = _built(build_dir)
    assert any(p.suffix == ".so" for p in built), built
    again = evaluate(job(DIAG_PROBLEM, CPP_CANDIDATE, build_dir, strict_threshold=1e9))
    assert again.status == "ok", again.message
    assert again.build_cached
    assert again.compile_time_s < result_first.compile_time_s / 3
    # nothing was compiled or linked again (the whole evaluation's wall time, compared with
    # the first one's, was not a measure of that: a loaded host's timing windows vary by
    # more than a fast host's compile takes)
    assert _built(build_dir) == built
    assert len([p for p in build_dir.iterdir() if p.is_dir()]) == 1


def test_a_relative_build_dir_names_the_same_cache(first: tuple[Result, float], build_dir: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Children run in dirs of their own: a relative build dir is taken from the caller's."""
    monkeypatch.chdir(build_dir.parent)
    again = evaluate(job(DIAG_PROBLEM, CPP_CANDIDATE, Path(build_dir.name), strict_threshold=1e9))
    assert again.status == "ok", again.message
    assert again.build_cached, "the worker compiled again: the relative dir was not the cache"
    assert len([p for p in build_dir.iterdir() if p.is_dir()]) == 1


def test_compile_error_keeps_the_compiler_error_line(first: tuple[Result, float],
                                                     build_dir: Path) -> None:
    result = evaluate(job(DIAG_PROBLEM, BROKEN_CANDIDATE, build_dir, timeout_s=400.0))
    assert result.status == "compile_error" and result.reward == 0.0
    assert "error" in result.compile_log
    assert "undeclared_thing" in result.compile_log
    assert "-MMD" not in result.compile_log  # no ninja command lines
    assert len(result.compile_log.splitlines()) <= 41
    assert "Error building extension" in result.message
    # the broken build lives in its own keyed dir, beside the good one
    assert len([p for p in build_dir.iterdir() if p.is_dir()]) == 2


# -- build-only mode (the engine compiles the next candidates while the GPU times another) ----

# Another source, so another keyed build dir than the candidate above.
BUILD_ONLY_CANDIDATE = CPP_CANDIDATE.replace("extra_cflags=[\"-O2\"]", "extra_cflags=[\"-O1\"]")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[BuildOutcome, Path]:
    builds = tmp_path_factory.mktemp("build-only")
    outcome = build(job(DIAG_PROBLEM, BUILD_ONLY_CANDIDATE, builds, timeout_s=400.0))
    return outcome, builds


def test_build_only_compiles_into_the_keyed_dir(built: tuple[BuildOutcome, Path]) -> None:
    outcome, builds = built
    assert outcome.ok and outcome.status == "ok", outcome.message + outcome.compile_log
    assert not outcome.cached and outcome.compile_time_s > 1.0
    per_source = [p for p in builds.iterdir() if p.is_dir()]  # src-<hash>/<build key>
    keyed = [p for p in per_source[0].iterdir() if p.is_dir()] if len(per_source) == 1 else []
    assert len(keyed) == 1 and (keyed[0] / "torch_extensions").is_dir()


def test_build_only_twice_is_cached(built: tuple[BuildOutcome, Path]) -> None:
    _, builds = built
    again = build(job(DIAG_PROBLEM, BUILD_ONLY_CANDIDATE, builds))
    assert again.ok and again.cached and again.compile_time_s == 0.0


def test_evaluate_after_build_only_finds_the_build_cached(
        built: tuple[BuildOutcome, Path]) -> None:
    outcome, builds = built
    result = evaluate(job(DIAG_PROBLEM, BUILD_ONLY_CANDIDATE, builds, strict_threshold=1e9))
    assert result.status == "ok", result.message
    assert result.build_cached and result.compile_time_s < outcome.compile_time_s / 3


def test_build_only_reports_a_python_error_as_compile_error(tmp_path: Path) -> None:
    broken = "import torch\nraise ImportError('no such kernel library')\n"
    outcome = build(job(DIAG_PROBLEM, broken, tmp_path))
    assert not outcome.ok and outcome.status == "compile_error"
    assert "no such kernel library" in outcome.compile_log + outcome.message
    missing = build(job(DIAG_PROBLEM, "import torch\n", tmp_path))
    assert missing.status == "compile_error" and "ModelNew" in missing.message


def test_build_only_cancel_is_a_timeout(tmp_path: Path) -> None:
    import threading

    cancel = threading.Event()
    threading.Timer(2.0, cancel.set).start()
    hang = "import time\nwhile True:\n    time.sleep(0.05)\n"
    outcome = build(job(DIAG_PROBLEM, hang, tmp_path), cancel=cancel)
    assert outcome.status == "timeout" and outcome.message == "cancelled" and not outcome.ok


# Another source again: a build of its own to interrupt.
INTERRUPTED_CANDIDATE = CPP_CANDIDATE.replace("extra_cflags=[\"-O2\"]", "extra_cflags=[\"-O3\"]")


def test_a_build_cancelled_mid_compile_does_not_hang_the_next_one(tmp_path: Path) -> None:
    """torch's lock file outlives a builder killed mid-compile; the next import of the
    extension waited on it until the timeout (a CI run: 240 s, "timed out during build")."""
    import threading

    cancel = threading.Event()
    batons: list[Path] = []

    def cancel_once_compiling() -> None:
        deadline = time.monotonic() + 120
        while not cancel.is_set() and time.monotonic() < deadline:
            batons.extend(tmp_path.glob("src-*/*/torch_extensions/*/lock"))
            if batons:
                time.sleep(1.0)  # ninja is running the compiler
                cancel.set()
            time.sleep(0.05)

    watcher = threading.Thread(target=cancel_once_compiling)
    watcher.start()
    cut = build(job(DIAG_PROBLEM, INTERRUPTED_CANDIDATE, tmp_path, timeout_s=400.0),
                cancel=cancel)
    cancel.set()
    watcher.join()
    assert cut.status == "timeout" and batons and batons[0].exists(), \
        "the build was not cut while torch held its lock: the test proves nothing"
    result = evaluate(job(DIAG_PROBLEM, INTERRUPTED_CANDIDATE, tmp_path, strict_threshold=1e9,
                          timeout_s=300.0))
    assert result.status == "ok", result.message + result.compile_log
    assert not result.build_cached and not batons[0].exists()
