"""An independent, deliberately simple harness: one (problem, candidate) pair, one process.

    python benchmarks/independent_harness.py PROBLEM.py CANDIDATE.py --device cuda --out row.json
    python benchmarks/independent_harness.py --args-from-stdin   # told its pair later

With ``--args-from-stdin`` the process imports torch, then waits for one line of JSON,
``{"argv": [the arguments above], "env": {variables to set first}}``: a batch can start the
next pair's process (and its torch import) while the current pair is measured, and each pair
still gets a fresh process of its own.

Written to share nothing with ``evaluator/``: no guard, no sandbox, no poisoning, no
interleaving. What it does is what a careful person would do by hand:

1. set strict fp32 (TF32 off for cuBLAS *and* cuDNN: torch's default leaves cuDNN on TF32),
   then import the problem and the candidate as plain modules (the candidate first, so the
   precision flags it sets at import are known);
2. build ``Model`` and ``ModelNew`` from the same seed, then load the reference's state_dict
   into ``ModelNew`` where names and shapes match;
3. correctness: ``torch.allclose(out, ref, rtol=tol, atol=tol)`` on ``--trials`` inputs made
   by ``get_inputs()`` under seeds 1..n, each call on its own clone of the inputs, the
   reference under strict fp32 and the candidate under the flags it set;
4. timing: ``triton.testing.do_bench`` (L2 flush, CUDA events, median) on CUDA, a
   ``perf_counter`` median on CPU; the reference is timed under the precision flags the
   candidate left set (matched precision) and again under strict fp32 defaults. The three
   are timed in turn, three rounds, and each counts its fastest median: another process
   starting on the GPU meanwhile (a batch's next evaluator child creating its CUDA context)
   slowed single 100 ms measurements by 16-26 % (H100, 2026-11-26), and only ever slows one.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

SEED = 1234
TOLERANCE = {"strict": 1e-4, "relaxed": 1e-2}
ROUNDS = 3  # timing rounds; each side counts its fastest median
STRICT_FP32 = {"matmul.allow_tf32": False, "cudnn.allow_tf32": False, "cudnn.benchmark": False,
               "float32_matmul_precision": "highest", "fp16_reduced_reduction": True}
# what a user's own code runs at unless it says otherwise: cuDNN convolutions in TF32
TORCH_DEFAULTS = {**STRICT_FP32, "cudnn.allow_tf32": True}
BASELINES = {"defaults": TORCH_DEFAULTS, "strict": STRICT_FP32}


def import_file(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def precision_flags() -> dict[str, Any]:
    return {
        "matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
        "cudnn.benchmark": torch.backends.cudnn.benchmark,
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "fp16_reduced_reduction":
            torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
    }


def set_flags(flags: dict[str, Any]) -> None:
    torch.backends.cuda.matmul.allow_tf32 = flags["matmul.allow_tf32"]
    torch.backends.cudnn.allow_tf32 = flags["cudnn.allow_tf32"]
    torch.backends.cudnn.benchmark = flags["cudnn.benchmark"]
    torch.set_float32_matmul_precision(flags["float32_matmul_precision"])
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = \
        flags["fp16_reduced_reduction"]


def to_device(values: list[Any], device: str) -> list[Any]:
    return [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]


def clone(values: list[Any]) -> list[Any]:
    return [v.clone() if isinstance(v, torch.Tensor) else v for v in values]


def build_models(problem: ModuleType, candidate: ModuleType, device: str
                 ) -> tuple[torch.nn.Module, torch.nn.Module]:
    init = problem.get_init_inputs()
    torch.manual_seed(SEED)
    reference = problem.Model(*init).to(device)
    torch.manual_seed(SEED)
    model_new = candidate.ModelNew(*init)
    own = model_new.state_dict()
    matching = {k: v for k, v in reference.state_dict().items()
                if k in own and own[k].shape == v.shape}
    model_new.load_state_dict(matching, strict=False)
    return reference, model_new.to(device)


def bench(fn: Callable[[], Any], device: str, budget_ms: int) -> float:
    if device.startswith("cuda"):
        import triton.testing

        return float(triton.testing.do_bench(fn, warmup=max(5, budget_ms // 4), rep=budget_ms,
                                             return_mode="median"))
    fn()
    samples: list[float] = []
    deadline = time.perf_counter() + budget_ms / 1000
    while len(samples) < 5 or (time.perf_counter() < deadline and len(samples) < 200):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def time_sides(sides: dict[str, tuple[Callable[[], Any], dict[str, Any]]], device: str,
               budget_ms: int) -> dict[str, float]:
    """Each side's fastest median over ``ROUNDS`` rounds, the sides in turn, each under its
    precision flags."""
    best: dict[str, float] = {}
    for _ in range(ROUNDS):
        for name, (fn, flags) in sides.items():
            set_flags(flags)
            ms = bench(fn, device, budget_ms)
            best[name] = min(ms, best.get(name, ms))
    return best


def check(problem: ModuleType, reference: torch.nn.Module, model_new: torch.nn.Module,
          device: str, trials: int, tol: float, baseline: dict[str, Any]
          ) -> tuple[bool, float, str]:
    worst = 0.0
    matched = precision_flags()
    for trial in range(1, trials + 1):
        torch.manual_seed(trial)
        inputs = to_device(problem.get_inputs(), device)
        set_flags(STRICT_FP32)
        expected = reference(*clone(inputs))
        set_flags(baseline)
        own = reference(*clone(inputs))  # the baseline's own distance from strict fp32
        scale = float(expected.abs().max()) if expected.numel() else 1.0
        tol_here = max(tol, 2 * float((own - expected).abs().max()) / max(scale, 1e-12)
                       if expected.numel() else 0.0)
        set_flags(matched)
        got = model_new(*clone(inputs))
        if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
            return False, float("inf"), f"trial {trial}: output shape or type differs"
        if got.dtype != expected.dtype:
            got = got.to(expected.dtype)
        worst = max(worst, float((got - expected).abs().max()) if got.numel() else 0.0)
        if not torch.allclose(got, expected, rtol=tol_here, atol=tol_here * scale):
            return False, worst, f"trial {trial}: max abs error {worst:.3g} > {tol_here:g}"
    return True, worst, ""


def run(args: argparse.Namespace) -> dict[str, Any]:
    row: dict[str, Any] = {"status": "ok", "message": ""}
    started = time.monotonic()
    device = args.device
    set_flags(STRICT_FP32)
    strict = precision_flags()
    set_flags(BASELINES[args.baseline])  # the candidate and the problem import under it
    try:
        candidate = import_file("independent_candidate", Path(args.candidate))
    except Exception as exc:  # a build error of the candidate's extension
        kind = "compile_error" if "Error building extension" in str(exc) else "runtime_error"
        return {**row, "status": kind, "message": _short(exc)}
    problem = import_file("independent_problem", Path(args.problem))
    with torch.no_grad():
        try:
            reference, model_new = build_models(problem, candidate, device)
            torch.manual_seed(0)
            inputs = to_device(problem.get_inputs(), device)
            model_new(*clone(inputs))  # warm-up: lazy builds and flags set on the first call
            matched = precision_flags()
            row["flags_candidate"], row["flags_strict"] = matched, strict
            ok, err, message = check(problem, reference, model_new, device, args.trials,
                                     TOLERANCE[args.tolerance], BASELINES[args.baseline])
            row.update(max_abs_err=err, message=message)
            if not ok:
                return {**row, "status": "incorrect", "wall_s": _since(started)}
            row.update(time_sides({
                "candidate_ms": (lambda: model_new(*inputs), matched),
                "reference_ms": (lambda: reference(*inputs), matched),
                "reference_strict_ms": (lambda: reference(*inputs), strict)},
                device, args.budget_ms))
        except Exception as exc:
            return {**row, "status": "runtime_error", "message": _short(exc),
                    "wall_s": _since(started)}
    row["speedup"] = row["reference_ms"] / row["candidate_ms"]
    row["strict_speedup"] = row["reference_strict_ms"] / row["candidate_ms"]
    row["wall_s"] = _since(started)
    return row


def _since(started: float) -> float:
    return round(time.monotonic() - started, 3)


def _short(exc: BaseException) -> str:
    lines = traceback.format_exception_only(type(exc), exc)
    return "".join(lines).strip()[-2000:]


def parser() -> argparse.ArgumentParser:
    made = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    made.add_argument("problem")
    made.add_argument("candidate")
    made.add_argument("--device", default="cuda")
    made.add_argument("--trials", type=int, default=3)
    made.add_argument("--tolerance", choices=sorted(TOLERANCE), default="strict")
    made.add_argument("--budget-ms", type=int, default=100)
    made.add_argument("--baseline", choices=sorted(BASELINES), default="defaults",
                      help="the flags the reference is timed at before the candidate's own: "
                           "PyTorch's defaults (cuDNN TF32 on) or strict fp32")
    made.add_argument("--out", type=Path, required=True)
    return made


def args_from_stdin() -> argparse.Namespace | None:
    """The pair's arguments and environment from one JSON line; None when stdin closes."""
    line = sys.stdin.readline()
    if not line.strip():
        return None
    told = json.loads(line)
    os.environ.update({str(k): str(v) for k, v in told.get("env", {}).items()})
    return parser().parse_args([str(a) for a in told["argv"]])


def main() -> int:
    if sys.argv[1:] == ["--args-from-stdin"]:
        args = args_from_stdin()
        if args is None:
            return 0
    else:
        args = parser().parse_args()
    args.out.write_text(json.dumps(run(args), indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
