"""Where does window-to-window noise come from? One pair evaluated back to back under
conditions that each take one suspect away (or add one), with the spread of each side's
window samples, ``(max - min) / median``, and the speedup.

    python benchmarks/noise_diag.py PROBLEM CANDIDATE [--device cuda] [--repeat 3]
        [--conditions default,no_early_prewarm,no_warm,disturb] [--budget 1.0]

Conditions (set in this process only, on the evaluator's own switches):

``default``           as ``compare_gpu.py`` runs it (warm children, started early on a GPU host:
                      beside the interleaved rounds until 2026-11-28, after the timing since)
``no_early_prewarm``  the next evaluation's children start after this one ends
                      (``launch.EARLY_PREWARM_MIN_CORES`` out of reach)
``no_warm``           no warm children at all (every evaluation starts its own, cold)
``disturb``           ``no_warm``, and beside it a loop that starts a process every
                      ``--disturb-every`` seconds which imports torch, makes a CUDA context,
                      allocates and runs one kernel on the same GPU, and exits (as the next
                      independent-harness process or a warm child does)

On 2026-11-28 (4x H200, four jobs on the host) a side's windows spread 19 % (median over the
corpus), a quarter above 55 %: ``relu_warmup_pick_method``'s candidate read 0.50-1.04 ms a call
for a 0.51 ms kernel.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from cudal1_evaluator import launch
from cudal1_evaluator.parent import warm
from cudal1_evaluator.schema import Job, Result

DISTURBER = """
import torch
x = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
x.fill_(1)
torch.cuda.synchronize()
"""


def _spread(samples: list[float]) -> float:
    return (max(samples) - min(samples)) / statistics.median(samples) if len(samples) > 1 else 0.0


def _disturb(stop: threading.Event, every_s: float, device: str) -> None:
    env_device = device.split(":")[1] if ":" in device else None
    while not stop.wait(every_s):
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=env_device) if env_device else None
        subprocess.run([sys.executable, "-c", DISTURBER], env=env, check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _set(condition: str) -> None:
    warm.discard_all()
    warm.enabled = condition in ("default", "no_early_prewarm")
    launch.EARLY_PREWARM_MIN_CORES = 8 if condition == "default" else 1 << 30


def _evaluate(job: Job, condition: str, every_s: float) -> Result:
    stop = threading.Event()
    side = threading.Thread(target=_disturb, args=(stop, every_s, job.device), daemon=True)
    if condition == "disturb":
        side.start()
    try:
        return launch.evaluate(job)
    finally:
        stop.set()
        if side.is_alive():
            side.join()


def _row(condition: str, i: int, result: Result) -> dict[str, Any]:
    row: dict[str, Any] = {"condition": condition, "run": i, "status": result.status,
                           "speedup": result.speedup or 0.0}
    for side in ("reference", "candidate"):
        summary = result.timing.get(side)
        samples = list(summary.samples_ms) if summary is not None else []
        row[side] = (statistics.median(samples) if samples else 0.0, _spread(samples),
                     len(samples))
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problem", type=Path)
    parser.add_argument("candidate", type=Path)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--budget", type=float, default=1.0, help="timing budget, s")
    parser.add_argument("--conditions", default="default,no_early_prewarm,no_warm,disturb")
    parser.add_argument("--disturb-every", type=float, default=1.0)
    args = parser.parse_args()
    job = Job(problem_source=args.problem.read_text(), candidate_source=args.candidate.read_text(),
              device=args.device, correctness_trials=3, timing_budget_s=args.budget, warmup=2,
              min_samples=10, max_samples=100, stable_rel_ci=0.02)
    rows = []
    for condition in args.conditions.split(","):
        _set(condition)
        launch.evaluate(job)  # untimed here: builds, caches, the first children
        for i in range(args.repeat):
            row = _row(condition, i, _evaluate(job, condition, args.disturb_every))
            rows.append(row)
            ref, cand = row["reference"], row["candidate"]
            print(f"{condition:17s} run {i}: {row['status']:10s} {row['speedup']:7.3f}x  "
                  f"reference {ref[0]:.4f} ms spread {ref[1]:5.1%} n={ref[2]}  "
                  f"candidate {cand[0]:.4f} ms spread {cand[1]:5.1%} n={cand[2]}", flush=True)
    print(f"\n{'condition':17s} {'speedup (min-max)':>20s} {'ref spread':>11s} "
          f"{'cand spread':>12s}")
    for condition in args.conditions.split(","):
        mine = [r for r in rows if r["condition"] == condition]
        speeds = [r["speedup"] for r in mine]
        print(f"{condition:17s} {min(speeds):8.3f}-{max(speeds):<8.3f}    "
              f"{statistics.median(r['reference'][1] for r in mine):10.1%} "
              f"{statistics.median(r['candidate'][1] for r in mine):11.1%}")


if __name__ == "__main__":
    main()
