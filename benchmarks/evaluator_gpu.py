"""Prove the evaluator on a CUDA GPU and print what it measured.

Sections (pick with --only, default all):
  exploits    the exploit regression suite on CUDA (gate on, and gate bypassed)
  repeat      the same candidate evaluated 5 times: spread of the speedup
  dobench     agreement of the evaluator's reference times with triton.testing.do_bench
  compile     cold compile time and cached re-evaluation time of a CUDA candidate
  throughput  candidates evaluated per minute

Run from the repository root on an H100/H200 (torch with CUDA, nvcc, ninja, triton):
    PYTHONUNBUFFERED=1 python benchmarks/evaluator_gpu.py --out "$OUT"
Results go to stdout as tables and to OUT/evaluator_gpu.json.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cudal1_evaluator.launch import evaluate  # noqa: E402
from cudal1_evaluator.schema import Job, Result  # noqa: E402

EXAMPLES = ROOT / "examples"
CANDIDATES = ROOT / "benchmarks" / "candidates"
DOBENCH_EXAMPLES = [
    "gelu_swish_chain", "row_logsumexp", "rmsnorm", "softmax_temperature", "cross_entropy",
    "depthwise_conv1d", "matmul_transposed_a", "causal_attention", "conv2d_bias_relu_groupnorm",
    "mixer_block",
]
REPEAT_CANDIDATES = [
    ("gelu_swish_chain", "gelu_swish_chain_cuda"),
    ("rmsnorm", "rmsnorm_cuda"),
]


DEVICE = "cuda"


def example(name: str) -> str:
    source = (EXAMPLES / f"{name}.py").read_text()
    if DEVICE == "cpu":  # a dry run of this script's plumbing, at the examples' CPU sizes
        from cudal1_tui.problem.sizing import shrink_for_cpu

        source = shrink_for_cpu(source)
    return source


def candidate(name: str) -> str:
    return (CANDIDATES / f"{name}.py").read_text()


def copy_of_reference(problem_source: str) -> str:
    """An honest candidate: the reference's own code under the name ModelNew."""
    return re.sub(r"\bModel\b", "ModelNew", problem_source)


def job(problem: str, cand: str, *, build_dir: str, name: str, budget: float = 3.0,
        trials: int = 3, **extra: Any) -> Job:
    return Job(problem_source=problem, candidate_source=cand, device=DEVICE, problem_name=name,
               timing_budget_s=budget, correctness_trials=trials, build_dir=build_dir,
               timeout_s=600, **extra)


def table(title: str, header: list[str], rows: list[list[Any]]) -> str:
    cells = [[str(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h)
              for i, h in enumerate(header)]
    line = lambda row: "| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |"  # noqa: E731, E501
    out = [f"\n### {title}\n", line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(r) for r in cells]
    return "\n".join(out)


def fmt(x: float | None, digits: int = 3) -> str:
    return "—" if x is None else f"{x:.{digits}g}"


def median_ms(result: Result, key: str) -> float | None:
    timing = result.timing.get(key)
    return timing.median_ms if timing and timing.n else None


# ---------------------------------------------------------------- sections


def section_exploits(build_dir: str) -> tuple[str, list[dict[str, Any]]]:
    sys.path.insert(0, str(ROOT / "tests" / "exploits"))
    from suite import run_suite  # type: ignore[import-not-found]

    rows = run_suite("cuda", build_dir=build_dir)
    printable = [[r["name"], r["kind"], r["gate"], r["runtime_status"], fmt(r.get("reward")),
                  r["caught_by"], "PASS" if r["as_expected"] else "FAIL"] for r in rows]
    text = table("exploit suite on CUDA", ["case", "kind", "gate", "runtime verdict", "reward",
                                           "caught by", "outcome"], printable)
    return text, rows


def section_repeat(build_dir: str, times: int = 5) -> tuple[str, list[dict[str, Any]]]:
    rows, printable = [], []
    for problem_name, cand_name in REPEAT_CANDIDATES:
        speedups, cand_ms, statuses = [], [], []
        source = example(problem_name)
        cand = candidate(cand_name) if DEVICE == "cuda" else copy_of_reference(source)
        for _ in range(times):
            result = evaluate(job(source, cand,
                                  build_dir=build_dir, name=problem_name, budget=3.0))
            statuses.append(result.status)
            if result.speedup:
                speedups.append(result.speedup)
                cand_ms.append(median_ms(result, "candidate") or 0.0)
        med = statistics.median(speedups) if speedups else None
        spread = (max(speedups) - min(speedups)) / med if speedups and med else None
        kernel_us = statistics.median(cand_ms) * 1000 if cand_ms else None
        rows.append({"problem": problem_name, "candidate": cand_name, "speedups": speedups,
                     "statuses": statuses, "median_speedup": med, "spread": spread,
                     "candidate_us": kernel_us})
        printable.append([cand_name, ", ".join(statuses), fmt(kernel_us, 4),
                          " ".join(f"{s:.2f}" for s in speedups), fmt(med, 4),
                          f"{spread * 100:.2f}%" if spread is not None else "—"])
    text = table(f"same candidate evaluated {times} times",
                 ["candidate", "statuses", "kernel µs", "speedups", "median",
                  "spread (max-min)/med"], printable)
    return text, rows


def _host_median(fn: Callable[[], Any], reps: int = 20) -> float:
    fn()
    samples = []
    for _ in range(reps):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def _dobench_median(problem_source: str) -> float:
    import torch

    namespace: dict[str, Any] = {"__name__": "bench_problem"}
    exec(compile(problem_source, "bench_problem", "exec"), namespace)
    torch.manual_seed(0)
    model = namespace["Model"](*namespace["get_init_inputs"]()).to(DEVICE)
    inputs = [x.to(DEVICE) if isinstance(x, torch.Tensor) else x
              for x in namespace["get_inputs"]()]
    with torch.no_grad():
        if DEVICE == "cpu":  # dry run: no triton on a CPU
            return _host_median(lambda: model(*inputs))
        import triton.testing

        ms = triton.testing.do_bench(lambda: model(*inputs), warmup=100, rep=500,
                                     return_mode="median")
    return float(ms)


def section_dobench(build_dir: str) -> tuple[str, list[dict[str, Any]]]:
    rows, printable = [], []
    for name in DOBENCH_EXAMPLES:
        source = example(name)
        result = evaluate(job(source, copy_of_reference(source), build_dir=build_dir, name=name,
                              budget=3.0, trials=2, profile=False))
        ours = median_ms(result, "reference_pristine") or median_ms(result, "reference")
        theirs = _dobench_median(source)
        ratio = ours / theirs if ours else None
        reference = result.timing.get("reference")
        rows.append({"problem": name, "status": result.status, "evaluator_ms": ours,
                     "do_bench_ms": theirs, "ratio": ratio, "speedup_copy": result.speedup,
                     "samples": reference.n if reference else 0})
        printable.append([name, result.status, fmt(ours, 4), fmt(theirs, 4),
                          f"{(ratio - 1) * 100:+.1f}%" if ratio else "—", fmt(result.speedup, 3)])
    text = table("evaluator reference median vs triton.testing.do_bench (median)",
                 ["problem", "status (copy)", "evaluator ms", "do_bench ms", "difference",
                  "copy speedup"], printable)
    return text, rows


def section_compile(_: str) -> tuple[str, list[dict[str, Any]]]:
    fresh = tempfile.mkdtemp(prefix="cold-build-")
    source, cand = example("diag_matmul"), candidate("diag_matmul_cuda")
    rows, printable = [], []
    # back to back, then as in a session: the model writes the next candidate for a while,
    # in which the launcher's next workers start warm (the profile child starts CUPTI, ~2.5 s)
    runs = [("cold", 0.0), ("cached, back to back", 0.0), ("cached again, back to back", 0.0),
            ("cached, after a 10 s gap", 10.0), ("cached again, after a 10 s gap", 10.0)]
    for label, gap in runs:
        time.sleep(gap)
        started = time.monotonic()
        result = evaluate(job(source, cand, build_dir=fresh, name="diag_matmul", budget=1.0,
                              trials=2, strict_threshold=1e9))
        wall = time.monotonic() - started
        rows.append({"run": label, "status": result.status, "compile_time_s": result.compile_time_s,
                     "build_cached": result.build_cached, "wall_s": wall})
        printable.append([label, result.status, f"{result.compile_time_s:.2f}",
                          str(result.build_cached), f"{wall:.1f}"])
    text = table("compile: cold build and cached re-evaluation (timing budget 1 s, profiler on)",
                 ["run", "status", "compile/load s", "build cached", "whole evaluation s"],
                 printable)
    return text, rows


def section_throughput(build_dir: str) -> tuple[str, list[dict[str, Any]]]:
    names = ["gelu_swish_chain", "rmsnorm", "row_logsumexp", "softmax_temperature",
             "cross_entropy", "depthwise_conv1d"]
    rows, printable = [], []
    for budget in (2.0,):
        started = time.monotonic()
        statuses = []
        for name in names:
            source = example(name)
            result = evaluate(job(source, copy_of_reference(source), build_dir=build_dir,
                                  name=name, budget=budget, trials=5))
            statuses.append(result.status)
        elapsed = time.monotonic() - started
        per_min = len(names) / elapsed * 60
        rows.append({"timing_budget_s": budget, "candidates": len(names), "elapsed_s": elapsed,
                     "per_minute": per_min, "statuses": statuses})
        printable.append([f"{budget:g}", str(len(names)), f"{elapsed:.1f}", f"{per_min:.1f}",
                          ", ".join(sorted(set(statuses)))])
    text = table("throughput: plain-PyTorch candidates, one after another",
                 ["timing budget s", "candidates", "elapsed s", "per minute", "statuses"],
                 printable)
    return text, rows


SECTIONS: dict[str, Callable[[str], tuple[str, list[dict[str, Any]]]]] = {
    "exploits": section_exploits,
    "repeat": section_repeat,
    "dobench": section_dobench,
    "compile": section_compile,
    "throughput": section_throughput,
}


def environment() -> dict[str, Any]:
    import subprocess

    import torch

    def out(cmd: list[str]) -> str:
        try:
            return subprocess.run(cmd, capture_output=True, text=True).stdout
        except OSError:
            return ""

    nvcc = out(["nvcc", "--version"])
    smi = out(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
               "--format=csv,noheader"])
    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = "missing"
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none (CPU)"
    return {"gpu": gpu, "nvidia_smi": smi.strip(),
            "torch": torch.__version__, "cuda": torch.version.cuda,
            "nvcc": nvcc.strip().splitlines()[-2] if nvcc else "missing",
            "triton": triton_version, "python": sys.version.split()[0]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="*", choices=sorted(SECTIONS), default=None)
    parser.add_argument("--out", type=Path, default=Path("."))
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                        help="cpu: a dry run of the plumbing at CPU sizes (numbers meaningless)")
    args = parser.parse_args()
    global DEVICE
    DEVICE = args.device
    env = environment()
    print(json.dumps(env, indent=2))
    build_dir = tempfile.mkdtemp(prefix="evaluator-bench-")
    report: dict[str, Any] = {"environment": env, "sections": {}}
    texts = []
    for name in args.only or list(SECTIONS):
        started = time.monotonic()
        print(f"\n== {name} ...", flush=True)
        try:
            text, rows = SECTIONS[name](build_dir)
        except Exception as exc:  # a broken section must not hide the others' numbers
            text, rows = f"\n### {name}: FAILED: {type(exc).__name__}: {exc}", []
        report["sections"][name] = {"rows": rows, "seconds": time.monotonic() - started}
        texts.append(text)
        print(text, flush=True)
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "evaluator_gpu.json").write_text(json.dumps(report, indent=2, default=str))
    print("\n\n==== summary ====")
    print("\n".join(texts))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
