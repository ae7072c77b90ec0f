"""Where a cached re-evaluation spends its time, phase by phase, on this machine's device.

    python benchmarks/evaluator_phases.py                 # CPU here, CUDA where there is one
    python benchmarks/evaluator_phases.py --device cpu --size 1024 --repeat 3
    python benchmarks/evaluator_phases.py --problem P.py --candidate C.py
    python benchmarks/evaluator_phases.py --pair relu_triton --trials 5 --budget 10  # corpus

It evaluates one candidate once to warm the build and pristine caches, then ``--repeat`` more
times, and prints, for each repeat, the phases as the parent sees them (from the worker's
progress events) and, when the worker reports them, the phases as the worker measured them.
Settings follow the field measurement: 2 correctness trials, a 1 s timing budget.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from cudal1_evaluator import launch  # noqa: E402
from cudal1_evaluator.parent import conduct  # noqa: E402
from cudal1_evaluator.schema import Job, Result  # noqa: E402

PROBLEM = '''
import torch
import torch.nn as nn

N = {n}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.relu(torch.matmul(A, B))


def get_inputs():
    return [torch.randn(N, N), torch.randn(N, N)]


def get_init_inputs():
    return []
'''

CANDIDATE = '''
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.mm(A, B).clamp_min_(0.0)
'''

Event = tuple[float, str, int, int]


def _phases(t0: float, events: list[Event], end: float) -> list[tuple[str, float]]:
    """Parent-side phases from the progress stream: each stage lasts until the next begins."""
    firsts: list[tuple[str, float]] = []
    for at, stage, _done, _total in events:
        if not firsts or firsts[-1][0] != stage:
            firsts.append((stage, at))
    rows = [("spawn + torch import + setup", (firsts[0][1] if firsts else end) - t0)]
    for i, (stage, at) in enumerate(firsts):
        until = firsts[i + 1][1] if i + 1 < len(firsts) else end
        label = {"reference": "pristine process (until its first round) + timing",
                 "timing": "timing (+ profile, report, exit)"}.get(stage, stage)
        rows.append((label, until - at))
    return rows


OPS: dict[str, list[float]] = {}  # "referee:seal" -> seconds of each request, this evaluation


def _timed(name: str, method: Any) -> Any:
    """The parent's own request method, timed per op (trusted code, this process only)."""
    def wrapper(self: conduct.Conductor, *args: Any, **kwargs: Any) -> Any:
        started = time.monotonic()
        try:
            return method(self, *args, **kwargs)
        finally:
            message = next((a for a in args if isinstance(a, dict)), {})
            side = f"{args[0]}:" if name == "runner" and args else ""
            OPS.setdefault(f"{name} {side}{message.get('op', '')}", []).append(
                time.monotonic() - started)
    return wrapper


def _time_requests() -> None:
    conduct.Conductor._ask_referee = _timed("referee", conduct.Conductor._ask_referee)  # type: ignore[method-assign]
    conduct.Conductor._ask_runner = _timed("runner", conduct.Conductor._ask_runner)  # type: ignore[method-assign]


def _print_requests(wall: float) -> None:
    total = sum(sum(v) for v in OPS.values())
    print(f"  requests: {total:.2f} s of {wall:.2f} s (the rest: children's start, waits, "
          "the profile pass, the verdict)")
    for key, values in sorted(OPS.items(), key=lambda kv: -sum(kv[1]))[:14]:
        print(f"    {key:<40} n={len(values):4d} total {sum(values):6.2f} s "
              f"median {1e3 * sorted(values)[len(values) // 2]:7.1f} ms")


METHODS: dict[str, list[float]] = {}  # "Conductor._round" -> seconds of each call (inclusive)

TRACED = {  # the parent's own steps, timed inclusively (nested ones count in their callers)
    conduct.Conductor: ["start", "build", "correctness", "timing", "settle_handoff", "finish",
                        "time_alone", "_settled", "_alone_at_size", "_timed_rounds", "_round",
                        "_side_window", "_window", "_check", "_empty_windows",
                        "_noop_requests", "_gpu_idle", "_recheck", "_size_sides",
                        "_resized_from_timed", "add_matched", "_stage_host", "_fill",
                        "_released", "_step", "_no_escape"],
    launch: ["_start", "_profile_apart", "_fresh_alone", "_prewarm_between_windows",
             "_prewarm_early", "_add_tool_info"],
}


def _traced(label: str, function: Any) -> Any:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.monotonic()
        try:
            return function(*args, **kwargs)
        finally:
            METHODS.setdefault(label, []).append(time.monotonic() - started)
    return wrapper


def _time_methods() -> None:
    """Each traced step of the parent wrapped with a clock (this process's code only)."""
    from cudal1_evaluator.parent import gpu_watch, verdict

    for owner, names in [*TRACED.items(), (gpu_watch.SharedRounds, ["settle"]),
                         (verdict, ["decide"])]:
        for name in names:
            label = f"{getattr(owner, '__name__', owner)}.{name}".split(".", 1)[-1]
            setattr(owner, name, _traced(label, getattr(owner, name)))


def _print_methods() -> None:
    print("  the parent's steps (inclusive: a step's time includes the steps it calls)")
    for key, values in sorted(METHODS.items(), key=lambda kv: -sum(kv[1])):
        print(f"    {key:<40} n={len(values):4d} total {sum(values):6.2f} s "
              f"median {1e3 * sorted(values)[len(values) // 2]:7.1f} ms")


def _print_rows(rows: list[tuple[str, float]]) -> None:
    print(f"  {'phase (parent view)':<56}{'seconds':>8}")
    for label, seconds in rows:
        print(f"  {label:<56}{seconds:>8.2f}")


WORKER: list[dict[str, float]] = []  # the candidate runner's own phase clock (diagnostic)


def _capture_reports() -> None:
    report_of = launch._report

    def capture(outcome: Any) -> Any:
        report = report_of(outcome)
        if report is not None and report.phases:
            WORKER.append(dict(report.phases))
        return report
    launch._report = capture  # type: ignore[assignment]


def _print_worker() -> None:
    for phases in WORKER:
        print("  the runner's own clock: " + ", ".join(f"{k} {v:.2f} s"
                                                    for k, v in phases.items()))


def evaluate_once(job: Job) -> tuple[Result, list[tuple[str, float]], float]:
    events: list[Event] = []
    OPS.clear()
    METHODS.clear()
    WORKER.clear()
    t0 = time.monotonic()
    result = launch.evaluate(job, on_progress=lambda s, d, n, _x: events.append(
        (time.monotonic(), s, d, n)))
    end = time.monotonic()
    return result, _phases(t0, events, end), end - t0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda if any)")
    parser.add_argument("--size", type=int, default=None, help="N of the N x N matmul problem")
    parser.add_argument("--problem", type=Path, help="a problem file instead of the matmul")
    parser.add_argument("--candidate", type=Path, help="a candidate file instead of torch.mm")
    parser.add_argument("--pair", help="a corpus pair (benchmarks/corpus/manifest.toml) by name")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--trials", type=int, default=2, help="correctness_trials (app: 5)")
    parser.add_argument("--budget", type=float, default=1.0, help="timing_budget_s")
    parser.add_argument("--gap", type=float, default=10.0,
                        help="seconds between evaluations (the model writing the next "
                             "candidate), in which the next worker starts warm")
    parser.add_argument("--steps", action="store_true",
                        help="also time the parent's own steps (rounds, windows, checks)")
    args = parser.parse_args()
    if args.pair:
        args.problem, args.candidate = _corpus_pair(args.pair)
    _time_requests()
    if args.steps:
        _time_methods()
    _capture_reports()
    device = args.device
    if device is None:
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    size = args.size or (8192 if device.startswith("cuda") else 1024)
    problem = args.problem.read_text() if args.problem else PROBLEM.format(n=size)
    candidate = args.candidate.read_text() if args.candidate else CANDIDATE
    build_dir = tempfile.mkdtemp(prefix="phases-builds-")
    job = Job(problem_source=problem, candidate_source=candidate, device=device,
              correctness_trials=args.trials, timing_budget_s=args.budget, build_dir=build_dir,
              strict_threshold=1e9)
    first, rows, wall = evaluate_once(job)
    what = args.pair or args.problem or f"N={size} matmul"
    print(f"device {device}, problem {what}; first evaluation (warms the caches): "
          f"{wall:.2f} s, {first.status}, speedup {first.speedup}"
          + (f" ({first.message[:300]})" if first.status != "ok" else ""))
    _print_rows(rows)
    _print_requests(wall)
    _print_worker()
    walls: list[float] = []
    for i in range(args.repeat):
        time.sleep(args.gap)
        result, rows, wall = evaluate_once(job)
        walls.append(wall)
        reused = any(f.code == "reference_pristine_reused" for f in result.flags)
        print(f"\ncached re-evaluation {i + 1}: {wall:.2f} s total, {result.status}, "
              f"build_cached={result.build_cached}, pristine reused={reused}")
        _print_rows(rows)
        _print_requests(wall)
        if args.steps:
            _print_methods()
        _print_worker()
    if walls:
        print(f"\nSUMMARY {what}: first {first.status} {first.speedup}; cached re-evaluations "
              f"{', '.join(f'{w:.2f}' for w in walls)} s (median {statistics.median(walls):.2f} s,"
              f" {args.trials} trials, budget {args.budget} s, gap {args.gap} s)")
    return 0


def _corpus_pair(name: str) -> tuple[Path, Path]:
    from benchmarks.compare_gpu import load_pairs

    for pair in load_pairs(ROOT / "benchmarks/corpus/manifest.toml"):
        if pair.name == name:
            return pair.problem, pair.candidate
    raise SystemExit(f"{name}: no such pair in benchmarks/corpus/manifest.toml")


if __name__ == "__main__":
    sys.exit(main())
