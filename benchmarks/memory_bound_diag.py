"""Why do memory-bound candidates of >= 256 MB a call read slower in our windows than in
``do_bench``? One process, no evaluator: each side of a corpus pair timed under conditions
that step from ``do_bench``'s to our window's one difference at a time.

    python benchmarks/memory_bound_diag.py [--pairs NAME ...] [--device cuda]

Conditions, per call in microseconds (CUDA events around a loop of K calls, K sized like our
windows: about 40 ms of the side's work, at most a sixth of the free memory):

``do_bench``         triton's do_bench: one input set, the output freed, an L2 flush per call
``same_free``        a window of K calls on one input set, each output freed at once
``fresh_free``       K input sets, one a call, each output freed at once
``fresh_held``       K input sets, every output held until the window ends (our runner's way)
``fresh_held_flush`` as ``fresh_held``, the L2 evicted before the window (as our referee does)
``fresh_held_cold``  as ``fresh_held_flush`` after ``torch.cuda.empty_cache()``: the
                     allocator must ask the driver for every output's memory

With each, the allocator's driver allocations and retries during the window (memory_stats
deltas). Where ``fresh_held`` is slower than ``fresh_free`` by the gap we see, the held
outputs (fresh memory a call: allocator growth or TLB reach) are the cause; where
``fresh_free`` already is, the fresh inputs are.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from independent_harness import build_models, import_file  # the same models as do_bench's side

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PAIRS = ("diag_broadcast", "diag_matmul_cuda_bench", "gelu_swish_compile",
                 "gelu_swish_cuda_bench", "conv3x3_relu_default_tf32", "relu_cuda_import")
WINDOW_MS = 40.0
REPEATS = 7  # windows per condition; the median is printed


def _pairs(names: list[str]) -> list[dict[str, Any]]:
    manifest = tomllib.loads((ROOT / "benchmarks/corpus/manifest.toml").read_text())
    by_name = {p["name"]: p for p in manifest["pair"]}
    missing = [n for n in names if n not in by_name]
    if missing:
        raise SystemExit(f"not in the manifest: {', '.join(missing)}")
    return [by_name[n] for n in names]


def _models(pair: dict[str, Any], device: str) -> tuple[ModuleType, torch.nn.Module,
                                                          torch.nn.Module]:
    problem = import_file(f"problem_{pair['name']}", ROOT / pair["problem"])
    candidate = import_file(f"candidate_{pair['name']}", ROOT / pair["candidate"])
    reference, new = build_models(problem, candidate, device)
    return problem, reference, new


def _inputs(problem: ModuleType, device: str) -> list[Any]:
    return [x.to(device) if isinstance(x, torch.Tensor) else x for x in problem.get_inputs()]


def _nbytes(values: Any) -> int:
    if isinstance(values, torch.Tensor):
        return values.numel() * values.element_size()
    if isinstance(values, (list, tuple)):
        return sum(_nbytes(v) for v in values)
    return 0


def _alloc_counters() -> dict[str, int]:
    stats = torch.cuda.memory_stats()
    return {k: int(stats.get(k, 0)) for k in ("num_device_alloc", "num_alloc_retries")}


class _Flusher:
    def __init__(self, device: str) -> None:
        self.buf = torch.empty(256 * 2**20, dtype=torch.int8, device=device)

    def __call__(self) -> None:
        self.buf.zero_()


def _window(fn: Callable[..., Any], sets: list[list[Any]], calls: int, *, hold: bool,
            flush: _Flusher | None) -> tuple[float, dict[str, int]]:
    """Microseconds a call over one window of ``calls`` calls (CUDA events), and the
    allocator's driver allocations and retries during it."""
    if flush is not None:
        flush()
    torch.cuda.synchronize()
    before = _alloc_counters()
    held: list[Any] = []
    start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
    end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
    start.record()
    for i in range(calls):
        out = fn(*sets[i % len(sets)])
        if hold:
            held.append(out)
    end.record()
    torch.cuda.synchronize()
    after = _alloc_counters()
    del held
    return start.elapsed_time(end) * 1e3 / calls, {k: after[k] - before[k] for k in after}


def _do_bench(fn: Callable[..., Any], inputs: list[Any]) -> float:
    import triton.testing

    return float(triton.testing.do_bench(lambda: fn(*inputs), warmup=25, rep=200,
                                         return_mode="median")) * 1e3


def _calls(fn: Callable[..., Any], inputs: list[Any], set_bytes: int) -> int:
    for _ in range(3):
        fn(*inputs)
    torch.cuda.synchronize()
    per_call_us, _ = _window(fn, [inputs], 10, hold=False, flush=None)
    by_time = max(2, int(WINDOW_MS * 1e3 / max(per_call_us, 1.0)))
    free, _total = torch.cuda.mem_get_info()
    by_memory = max(2, int(free / 6 // max(set_bytes, 1)))
    return min(by_time, by_memory, 1024)


def _side(fn: Callable[..., Any], problem: ModuleType, device: str,
          flusher: _Flusher) -> dict[str, Any]:
    inputs = _inputs(problem, device)
    with torch.no_grad():
        out_bytes = _nbytes(fn(*inputs))
        calls = _calls(fn, inputs, _nbytes(inputs) + out_bytes)
        fresh = [_inputs(problem, device) for _ in range(calls)]
        row: dict[str, Any] = {"calls": calls, "set_mb": (_nbytes(inputs) + out_bytes) / 2**20}
        try:
            row["do_bench"] = _do_bench(fn, inputs)
        except ImportError:
            row["do_bench"] = float("nan")
        plans = {"same_free": ([inputs], False, None), "fresh_free": (fresh, False, None),
                 "fresh_held": (fresh, True, None), "fresh_held_flush": (fresh, True, flusher)}
        for name, (sets, hold, flush) in plans.items():
            runs = [_window(fn, sets, calls, hold=hold, flush=flush) for _ in range(REPEATS)]
            row[name] = statistics.median(us for us, _ in runs)
            row[f"{name}_allocs"] = max(a["num_device_alloc"] for _, a in runs)
        cold = []
        for _ in range(3):
            torch.cuda.empty_cache()
            cold.append(_window(fn, fresh, calls, hold=True, flush=flusher))
        row["fresh_held_cold"] = statistics.median(us for us, _ in cold)
        row["fresh_held_cold_allocs"] = max(a["num_device_alloc"] for _, a in cold)
        del fresh
    torch.cuda.empty_cache()
    return row


CONDITIONS = ("do_bench", "same_free", "fresh_free", "fresh_held", "fresh_held_flush",
              "fresh_held_cold")


def _report(name: str, rows: dict[str, dict[str, Any]]) -> None:
    ref, cand = rows["reference"], rows["candidate"]
    print(f"\n{name}: K = {ref['calls']} / {cand['calls']} calls a window, "
          f"{ref['set_mb']:.0f} MB a call's inputs and output")
    print(f"  {'condition':18s} {'reference us':>13s} {'candidate us':>13s} {'speedup':>8s}"
          f" {'driver allocs (cand)':>21s}")
    for cond in CONDITIONS:
        allocs = cand.get(f"{cond}_allocs", "")
        print(f"  {cond:18s} {ref[cond]:13.1f} {cand[cond]:13.1f} "
              f"{ref[cond] / cand[cond]:8.2f} {allocs!s:>21s}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", nargs="*", default=list(DEFAULT_PAIRS))
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("needs a CUDA GPU")
        return 0
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    flusher = _Flusher(args.device)
    for pair in _pairs(args.pairs):
        try:
            problem, reference, candidate = _models(pair, args.device)
            rows = {side: _side(model, problem, args.device, flusher)
                    for side, model in (("reference", reference), ("candidate", candidate))}
        except Exception as exc:  # one pair's failure is a line, not the run's end
            print(f"\n{pair['name']}: failed: {type(exc).__name__}: {exc}")
            continue
        _report(pair["name"], rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
