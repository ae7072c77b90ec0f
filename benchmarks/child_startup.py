"""What a fresh evaluator child pays before its first useful call, step by step.

    python benchmarks/child_startup.py   # 3 children one after another, then 4 at once
    python benchmarks/child_startup.py --device cpu --runs 1 --concurrent 2

Each child is a plain ``python -c`` process (no sandbox: the sandbox's own cost is what
``evaluator_phases.py``'s init requests show beyond these steps). Steps, in order: the
interpreter, ``import torch``, the runner's modules, the dtype watch's CPU warm-up (what a warm
child does before a job), the device context, the first plain op on the device (cuBLAS), the
first *watched* op, dynamo's reset after it, and a second watched op with its reset.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r'''
import json, sys, time
marks = [("interpreter", time.time() - float(sys.argv[1]))]
last = time.monotonic()
def mark(name):
    global last
    now = time.monotonic()
    marks.append((name, now - last))
    last = now
device = sys.argv[2]
import torch
mark("import torch")
import cudal1_evaluator.candidate_side.worker  # noqa: F401
mark("import the runner's modules")
from cudal1_evaluator.candidate_side import dtype_watch
dtype_watch.warm_up()
mark("dtype watch warm-up (CPU)")
sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
x = torch.zeros(1, device=device); sync()
mark("device context")
a = torch.randn(512, 512, device=device); b = torch.randn(512, 512, device=device)
(a @ b).sum().item()
mark("first plain matmul")
seen = set()
dtype_watch.watched(lambda: torch.relu(a @ b), seen); sync()
mark("first watched matmul")
import torch._dynamo
torch._dynamo.reset()
mark("first dynamo reset")
dtype_watch.watched_then_reset(lambda: torch.relu(a @ b), seen); sync()
mark("second watched matmul + reset")
print("MARKS " + json.dumps(marks))
'''


def one_child(device: str) -> list[tuple[str, float]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", CHILD, repr(time.time()), device],
                          capture_output=True, text=True, env=env, timeout=300, check=False)
    for line in done.stdout.splitlines():
        if line.startswith("MARKS "):
            return [(str(k), float(v)) for k, v in json.loads(line[6:])]
    raise RuntimeError(f"child failed ({done.returncode}):\n{done.stderr[-2000:]}")


def print_runs(title: str, runs: list[list[tuple[str, float]]]) -> None:
    print(f"\n{title}")
    names = [name for name, _ in runs[0]]
    print(f"  {'step':<36}" + "".join(f"{'run ' + str(i + 1):>9}" for i in range(len(runs))))
    for j, name in enumerate(names):
        print(f"  {name:<36}" + "".join(f"{run[j][1]:>9.2f}" for run in runs))
    print(f"  {'total':<36}" + "".join(f"{sum(v for _, v in run):>9.2f}" for run in runs))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--runs", type=int, default=3, help="children one after another")
    parser.add_argument("--concurrent", type=int, default=4, help="children started at once")
    args = parser.parse_args()
    print_runs(f"{args.runs} children one after another (seconds)",
               [one_child(args.device) for _ in range(args.runs)])
    if args.concurrent > 1:
        with ThreadPoolExecutor(args.concurrent) as pool:
            runs = list(pool.map(one_child, [args.device] * args.concurrent))
        print_runs(f"{args.concurrent} children started at once (seconds)", runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
