"""What a busy thread of the app does to the evaluator's clock, in the app's process and in a
lane process of its own (``cudal1_tui.engine.lane_process``).

    python benchmarks/app_thread_noise.py                       # CPU here, CUDA where there is one
    python benchmarks/app_thread_noise.py --problem P.py --repeat 3

An honest copy of the problem's reference is evaluated four ways, ``--repeat`` times each:
``launch.evaluate`` called in this process (how the app ran it until the lane processes)
and through a lane process, each with this process quiet and beside one Python thread that
never sleeps (the screen, the model stream, another lane's conductor). It prints each side's
median per-call time and the speedup. The honest copy should read about 1x and about the
quiet per-call time in every row that keeps the clock away from the busy thread.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from cudal1_evaluator import launch  # noqa: E402
from cudal1_evaluator.schema import Job, Result  # noqa: E402
from cudal1_tui.judging import JUDGE  # noqa: E402

DEFAULT_PROBLEM = ROOT / "benchmarks/corpus/problems/tiny_scale_shift.py"


@contextmanager
def busy_thread(on: bool) -> Iterator[None]:
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            sum(range(2000))

    thread = threading.Thread(target=spin, daemon=True)
    if on:
        thread.start()
    try:
        yield
    finally:
        stop.set()
        if on:
            thread.join()


def in_this_process(job: Job) -> Result:
    return launch.evaluate(job)


def in_a_lane(job: Job) -> Result:
    return JUDGE.evaluate(job, JUDGE.gate(job))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problem", type=Path, default=DEFAULT_PROBLEM)
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda if any)")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--budget", type=float, default=1.0, help="timing_budget_s")
    args = parser.parse_args()
    device = args.device or ("cuda" if _has_cuda() else "cpu")
    problem = args.problem.read_text()
    job = Job(problem_source=problem, candidate_source=problem.replace(
        "class Model(", "class ModelNew("), device=device, correctness_trials=2,
        timing_budget_s=args.budget, build_dir=tempfile.mkdtemp(prefix="thread-noise-"),
        strict_threshold=1e9)
    ways: list[tuple[str, Callable[[Job], Result]]] = [  # the lane's rows first: the app's
        # process beside a busy thread can take minutes on a GPU (its calls wait on the lock)
        ("in a lane process", in_a_lane), ("in the app's process", in_this_process)]
    in_a_lane(job)  # the lane started and the caches warm: the rows compare steady states
    print(f"{args.problem.name} on {device}, an honest copy, {args.budget:g} s of timing")
    print("| where the clock runs | app thread | reference ms | candidate ms | speedup | status |")
    print("|---|---|---|---|---|---|")
    for _ in range(args.repeat):
        for where, evaluate in ways:
            for busy in (False, True):
                with busy_thread(busy):
                    result = evaluate(job)
                t = result.timing
                ref = t["reference"].median_ms if "reference" in t else float("nan")
                cand = t["candidate"].median_ms if "candidate" in t else float("nan")
                print(f"| {where} | {'busy' if busy else 'quiet'} | {ref:.4f} | {cand:.4f} | "
                      f"{result.speedup or 0:.3f} | {result.status} |", flush=True)
    return 0


def _has_cuda() -> bool:
    import subprocess

    probe = "import torch; print(torch.cuda.is_available())"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    return out.stdout.strip() == "True"


if __name__ == "__main__":
    sys.exit(main())
