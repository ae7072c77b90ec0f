"""The engine's pipeline: builds on the CPU cores while another candidate is timed.

Real evaluator subprocesses and real g++ builds through ``load_inline`` (two distinct C++
sources in this file, one good and one broken; the module shares one build dir), replies
served by the real replay server over HTTP.
"""

from __future__ import annotations

import itertools
import os
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from engine_events import Events
from procs import descendants

from cudal1_evaluator.reward import score
from cudal1_tui.config import Settings
from cudal1_tui.engine.engine import Engine
from cudal1_tui.engine.events import CandidateFinished, StageChanged
from cudal1_tui.engine.pool import EvalPool, device_lock
from cudal1_tui.engine.stages import BUILD_STARTED
from cudal1_tui.judging import needs_build
from cudal1_tui.replay import ReplayConfig, ReplayServer, Reply

ROOT = Path(__file__).resolve().parents[2]
PROBLEM = ROOT / "examples" / "diag_matmul.py"
EVALUATING = ("verifying", "timing")

HEAD = textwrap.dedent('''\
    ## Performance Analysis
    The reference builds an n-by-n diagonal matrix and runs a dense GEMM: O(n^2 m) work.
    {padding}
    ## Algorithm Design
    Row i of the product is a[i] * B[i, :]: a broadcast multiply, one pass over B.

    ## Code Implementation
    ```python
    ''')

PURE = HEAD.format(padding="") + textwrap.dedent('''\
    import torch
    import torch.nn as nn


    class ModelNew(nn.Module):
        def __init__(self):
            super().__init__()

        def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return a.unsqueeze(-1) * b
    ```
    ''')

CPP_CODE = textwrap.dedent('''\
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

    ext = load_inline(name="scale_rows_pool", cpp_sources=SOURCE, functions=["scale_rows"],
                      extra_cflags=["-O1"], verbose=False)


    class ModelNew(nn.Module):
        def __init__(self):
            super().__init__()

        def forward(self, a, b):
            return ext.scale_rows(a, b)
    ```
    ''')
BROKEN_CODE = CPP_CODE.replace("auto out = torch::empty_like(B);",
                               "auto out = torch::empty_like(B)\n    undeclared_thing();")
# Longer replies stream for longer: the pure reply is parsed first, then the good C++ one,
# then the broken one, so the queue order (and so the record order) is known.
CPP = HEAD.format(padding="One C++ loop over the rows. " * 4) + CPP_CODE
BROKEN = HEAD.format(padding="One C++ loop over the rows, written by hand. " * 20) + BROKEN_CODE


def settings_for(tmp: Path, base_url: str, build: Path, **changes: Any) -> Settings:
    values: dict[str, Any] = dict(
        base_url=base_url, sessions_dir=str(tmp / "sessions"), build_dir=str(build),
        device="cpu", correctness_trials=2, timing_budget_s=1.0, eval_timeout_s=400.0,
        strict_threshold=1e6, connect_timeout_s=2.0, request_timeout_s=60.0, retries=0,
        candidates_per_round=3, use_builtin=False, memory_limit_mb=4096,
    )
    values.update(changes)
    return Settings(**values)


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("builds")


@pytest.fixture
def replay() -> Iterator[ReplayServer]:
    config = ReplayConfig(replies=(Reply(PURE), Reply(CPP), Reply(BROKEN)), latency_s=0.03,
                          chunk_chars=16)
    with ReplayServer(config) as server:
        yield server


def build_window(events: Events, slot: int) -> tuple[int, int]:
    """Event positions of the slot's build stage: its start, and the event that ends it."""
    stages = events.stages(slot)
    start = next(i for i, e in stages if e.stage == "compiling" and e.detail == BUILD_STARTED)
    end = next(i for i, e in stages if i > start and e.stage == "compiling")
    return start, end


def eval_window(events: Events, slot: int) -> tuple[int, int] | None:
    """From the slot's first verifying/timing event to its verdict; None if never evaluated."""
    first = next((i for i, e in events.stages(slot) if e.stage in EVALUATING), None)
    return None if first is None else (first, events.finished_at(slot))


def _intersect(a: tuple[int, int], b: tuple[int, int] | None) -> bool:
    return b is not None and a[0] < b[1] and b[0] < a[1]


def test_builds_overlap_timing_one_evaluation_at_a_time(tmp_path: Path, builds: Path,
                                                        replay: ReplayServer) -> None:
    events = Events()
    engine = Engine(PROBLEM, settings_for(tmp_path, replay.base_url, builds), emit=events,
                    sizes="cpu")
    engine.open()
    try:
        summary = engine.run_round()
        records = engine.records()
    finally:
        engine.close()

    by_code = {r.code.strip(): r for r in records}
    pure = next(r for c, r in by_code.items() if "load_inline" not in c)
    cpp = next(r for c, r in by_code.items() if "undeclared_thing" not in c and r is not pure)
    broken = next(r for c, r in by_code.items() if "undeclared_thing" in c)
    assert len(records) == 3 and len(summary.records) == 3

    # Verdicts: the C++ candidate was built in the build stage, so its evaluation found the
    # build cached; the broken one is a compile_error straight from the build stage.
    assert pure.result.correct and cpp.result.correct, cpp.result.message
    assert cpp.result.build_cached is True
    assert broken.status == "compile_error" and broken.speedup is None
    assert "undeclared_thing" in broken.result.compile_log
    assert broken.reward == score(broken.reward_formula, {}, "compile_error", None).reward
    assert eval_window(events, broken.slot) is None  # never verified nor timed
    stages_of_broken = {e.stage for _, e in events.stages(broken.slot)}
    assert stages_of_broken - {"prompting", "generating", "parsing"} == \
        {"gating", "compiling", "recording"}

    # Overlap: a build ran while another candidate was being evaluated. Intervals, not event
    # order within them: how far the evaluation has got when a build starts depends on the load
    # (a warm child lost to memory pressure is replaced by a cold one, which starts later).
    overlapped = [(slot, r.slot) for slot in (cpp.slot, broken.slot) for r in records
                  if r.slot != slot and _intersect(build_window(events, slot),
                                                   eval_window(events, r.slot))]
    assert overlapped, "no build overlapped another candidate's evaluation"

    # One evaluation at a time on the device: the evaluation windows never interleave.
    windows = sorted(w for w in (eval_window(events, r.slot) for r in records) if w)
    assert len(windows) == 2
    assert all(a[1] < b[0] for a, b in itertools.pairwise(windows)), windows

    # Deterministic order: verdicts and trace in the order the replies were queued.
    parsed = [e.slot for e in events.items if isinstance(e, StageChanged)
              and e.stage == "parsing"]
    assert parsed == [pure.slot, cpp.slot, broken.slot]
    assert [e.slot for e in events.items if isinstance(e, CandidateFinished)] == parsed
    assert [r.slot for r in records] == parsed

    # The build stage counted its builds across the round.
    counts = [(e.done, e.total) for e in events.items if isinstance(e, StageChanged)
              and e.stage == "compiling" and e.slot in (cpp.slot, broken.slot)
              and (e.detail == BUILD_STARTED or e.detail.startswith("build "))]
    assert counts and max(d for d, _ in counts) == 2 and {t for _, t in counts} <= {1, 2}


def command_of(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:200]
    except OSError:
        return "?"


BUILD_PROCESSES = ("_child build", "ninja", "cc1plus", "g++", "c++")


def builders() -> dict[int, str]:
    """Build processes below this one (warm evaluator children and git helpers are not)."""
    found = {pid: command_of(pid) for pid in descendants(os.getpid())}
    return {pid: cmd for pid, cmd in found.items() if any(k in cmd for k in BUILD_PROCESSES)}


def wait_for_compiler(limit_s: float) -> bool:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if any("cc1plus" in cmd or "ninja" in cmd for cmd in builders().values()):
            return True
        time.sleep(0.1)
    return False


def test_cancel_during_a_build_stops_it(tmp_path: Path) -> None:
    config = ReplayConfig(replies=(Reply(CPP),))
    with ReplayServer(config) as server:
        events = Events()
        # A fresh build dir: the build is a real, uncached compile when the cancel lands.
        settings = settings_for(tmp_path, server.base_url, tmp_path / "fresh",
                                candidates_per_round=1)
        engine = Engine(PROBLEM, settings, emit=events, sizes="cpu")
        engine.open()
        cancelled_at: list[float] = []

        compiling: list[bool] = []

        def cancel_when_compiling() -> None:
            compiling.append(wait_for_compiler(90.0))
            cancelled_at.append(time.monotonic())
            engine.cancel()

        def cancel_on_build(event: Any) -> None:  # runs inside the engine's emit: no waiting
            if isinstance(event, StageChanged) and event.detail == BUILD_STARTED:
                threading.Thread(target=cancel_when_compiling, daemon=True).start()

        events.hooks.append(cancel_on_build)
        try:
            summary = engine.run_round()
            returned = time.monotonic()
            records = engine.records()
        finally:
            engine.close()
    assert compiling == [True], "the compiler never started"
    assert cancelled_at and summary.cancelled and records == [] and summary.records == []
    assert returned - cancelled_at[0] < 20.0
    assert not any(isinstance(e, StageChanged) and e.stage in EVALUATING
                   for e in events.items)
    # The sandboxed build and its compiler are gone.
    deadline = time.monotonic() + 5.0
    while builders() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert builders() == {}


def test_pool_evaluates_in_submission_order_whatever_the_builds_do() -> None:
    pool = EvalPool("cpu", workers=3)
    order: list[tuple[str, object]] = []
    running: list[str] = []
    overlaps: list[str] = []

    def build(name: str, delay: float) -> Any:
        def run() -> str:
            time.sleep(delay)
            return f"{name}-built"
        return run

    def evaluate(name: str) -> Any:
        def run(built: object) -> str:
            with pool.on_device():
                if running:
                    overlaps.append(name)
                running.append(name)
                time.sleep(0.05)
                order.append((name, built))
                running.remove(name)
            return name
        return run

    try:
        futures = [pool.submit(build("a", 0.3), evaluate("a")),
                   pool.submit(None, evaluate("b")),
                   pool.submit(build("c", 0.0), evaluate("c"))]
        assert [f.result(timeout=10) for f in futures] == ["a", "b", "c"]
    finally:
        pool.shutdown()
    assert order == [("a", "a-built"), ("b", None), ("c", "c-built")] and overlaps == []


def test_device_locks_are_shared_per_device_and_builds_are_detected() -> None:
    assert device_lock("cuda") is device_lock("cuda:0") is device_lock("CUDA:0")
    assert device_lock("cpu") is not device_lock("cuda:1")
    assert needs_build(CPP_CODE) and needs_build("from torch.utils import cpp_extension")
    assert not needs_build(PURE)
