"""What the referee's check of one call's output costs, by part, at the sizes the corpus has
(docs/benchmarks/evaluator.md, 2026-12-01 third session: on ``relu_triton``, 1 GiB in and
1 GiB out, a window's check took 98 ms a call, 3.7 s of a 12 s cached re-evaluation).

Times, on one device, for an output of each size (fp32, values as a kernel leaves them: a
copy of the expected output with a small error added):

- ``compare_many``: the referee's comparison of one call's output (``common/batch_compare``);
- ``mutated_many``: its bitwise check that the call left its input unchanged;
- ``full``: ``compare_many`` with its all-finite short judgement turned off (what the check
  cost before it: finiteness masks, ``where``, a lone call's output stacked), and whether
  both give the same verdict and maxima.

If ``compare_many`` and ``mutated_many`` add up to far less than the 98 ms, the check's time
goes elsewhere (placing the runner's outputs, re-reading the seal's samples).

    python benchmarks/check_cost_diag.py                       # CUDA where there is one
    python benchmarks/check_cost_diag.py --device cpu --sizes 4M,64M
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.switch_cost_diag import _size  # noqa: E402
from cudal1_evaluator.common import batch_compare, compare  # noqa: E402
from cudal1_evaluator.common.batch_compare import compare_many, mutated_many  # noqa: E402


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _median_ms(fn: Callable[[], Any], device: torch.device, repeat: int) -> tuple[float, Any]:
    out = fn()  # warm: the caching allocator's blocks, the kernels' first launches
    _sync(device)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        _sync(device)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), out


def full_judgement(expected: torch.Tensor, got: torch.Tensor) -> Any:
    """``compare_many`` with its all-finite short judgement turned off (in the batched and
    the single path): what a check cost before it."""
    short = compare.judge_finite_rows
    compare.judge_finite_rows = batch_compare.judge_finite_rows = lambda *_: None
    try:
        return compare_many([(expected, got)], "strict")
    finally:
        compare.judge_finite_rows = batch_compare.judge_finite_rows = short


def measure(nbytes: int, device: torch.device, repeat: int) -> dict[str, Any]:
    n = max(1, nbytes // 4)
    gen = torch.Generator(device=device).manual_seed(0)
    expected = torch.randn(n, device=device, generator=gen)
    got = expected + 1e-6 * torch.randn(n, device=device, generator=gen)
    inputs, originals = [expected.clone()], [expected.clone()]
    compare_ms, compared = _median_ms(lambda: compare_many([(expected, got)], "strict"),
                                      device, repeat)
    mutated_ms, mutated = _median_ms(lambda: mutated_many([inputs], [originals]), device, repeat)
    full_ms, full = _median_ms(lambda: full_judgement(expected, got), device, repeat)
    ref, old = compared[0], full[0]
    agrees = (ref.ok, ref.max_abs_err, ref.max_rel_err) == (old.ok, old.max_abs_err,
                                                            old.max_rel_err)
    read_ms = None
    if device.type == "cuda":
        read_ms, _ = _median_ms(lambda: (expected.sum(), got.sum()), device, repeat)
    return {"bytes": nbytes, "compare_many_ms": compare_ms, "mutated_many_ms": mutated_ms,
            "full_judgement_ms": full_ms, "read_both_once_ms": read_ms, "ok": ref.ok,
            "mutated": mutated[0], "agrees_with_full": agrees}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--sizes", default="4M,64M,256M,1G", help="bytes of one output")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    device = torch.device(args.device)
    print(f"device {device}; torch {torch.__version__}")
    print(f"{'output':>8} {'compare_many':>13} {'mutated_many':>13} {'full':>9} "
          f"{'read once':>10}  ok  agrees with full")
    for text in args.sizes.split(","):
        row = measure(_size(text), device, args.repeat)
        read = "-" if row["read_both_once_ms"] is None else f"{row['read_both_once_ms']:.2f}"
        print(f"{text:>8} {row['compare_many_ms']:>10.2f} ms {row['mutated_many_ms']:>10.2f} ms "
              f"{row['full_judgement_ms']:>6.2f} ms {read:>7} ms  {row['ok']!s:5} "
              f"{row['agrees_with_full']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
