"""Batch comparison: every (problem, candidate) pair through our evaluator AND an independent
harness, in the same run, one row per pair.

    PYTHONUNBUFFERED=1 PYTHONPATH=. python benchmarks/compare_gpu.py benchmarks/corpus/manifest.toml
    python benchmarks/compare_gpu.py DIR            # DIR/*/problem.py + DIR/*/candidate.py
    python benchmarks/compare_gpu.py MANIFEST --device cpu --only relu_ diag_   # a CPU dry run

1. builds: ``cudal1_evaluator.launch.build`` for every pair in a thread pool (cores less 4,
   niced, one ninja job each, ``--build-timeout`` apiece),
   each its own sandboxed process, into one build root keyed by source (as in a session: the
   evaluator's warm children are made for that root and used pair after pair);
2. as each build finishes (in the order they finish, so plain-PyTorch pairs are measured
   while nvcc runs), ``cudal1_evaluator.launch.evaluate`` on the device, then
   ``benchmarks/independent_harness.py`` in a fresh ``python`` process (same build cache, same
   ``TORCH_CUDA_ARCH_LIST``, so it compiles nothing either), started while our evaluation
   runs and told its pair on stdin, so its torch import costs the batch nothing;
3. a JSON file with one row per pair and a table; pairs per minute at the end.

Needs only torch (+ triton on CUDA) and the repository on PYTHONPATH. The static gate's verdict
is added per pair when ``cudal1_tui.analysis.gate`` imports (tree-sitter installed).
On ``--device cpu`` problems run at their ``# cpu-sizes``. On a host of fewer than 8 cores
every build finishes before the first measurement, no harness process starts ahead and the
evaluator keeps no warm children: a compiler or a torch import beside the timed calls took a
core from them (on 2 cores our reference came out bimodal, 0.8 or 24 ms a call for 0.3 ms of
work, and the independent harness's 0.2 ms references read 12-40 ms next to the warm
children's imports).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from concurrent.futures import Future, ThreadPoolExecutor, as_completed, wait
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from cudal1_evaluator.isolation import lifetime  # noqa: E402
from cudal1_evaluator.launch import build, evaluate  # noqa: E402
from cudal1_evaluator.parent import warm  # noqa: E402
from cudal1_evaluator.schema import BuildOutcome, Job, Result  # noqa: E402
from cudal1_tui.judging import FINAL_BUILD_STATUSES, build_verdict  # noqa: E402

HARNESS = Path(__file__).with_name("independent_harness.py")
SMALL_HOST_CORES = 8  # below: no core to spare for builds or a harness import beside timing


@dataclass
class Pair:
    name: str
    problem: Path
    candidate: Path
    device: str = "any"
    meta: dict[str, Any] = field(default_factory=dict)


def load_pairs(target: Path) -> list[Pair]:
    if target.is_file():
        data = tomllib.loads(target.read_text(encoding="utf-8"))
        return [Pair(p["name"], ROOT / p["problem"], ROOT / p["candidate"],
                     p.get("device", "any"), p) for p in data.get("pair", [])]
    if target.is_dir():
        return [Pair(d.name, d / "problem.py", d / "candidate.py")
                for d in sorted(target.iterdir()) if (d / "candidate.py").is_file()]
    raise SystemExit(f"{target}: no such manifest or folder")


def chosen(pairs: list[Pair], device: str, only: list[str], skip: list[str]) -> list[Pair]:
    kind = "cuda" if device.startswith("cuda") else "cpu"
    return [p for p in pairs if p.device in ("any", kind)
            and (not only or any(o in p.name for o in only))
            and not any(s in p.name for s in skip)]


_CPU_SIZES = re.compile(r"#\s*cpu-sizes:\s*(.+)")


def shrink_for_cpu(source: str) -> str:
    """Rewrite ``NAME = <int>`` lines to the values named in ``# cpu-sizes:``."""
    found = _CPU_SIZES.search(source)
    if not found:
        return source
    for item in found.group(1).split(","):
        name, _, value = item.strip().partition("=")
        source = re.sub(rf"(?m)^{re.escape(name.strip())}\s*=\s*[\d_.eE]+\s*$",
                        f"{name.strip()} = {value.strip()}", source)
    return source


def cuda_arch(device: str) -> str:
    if not device.startswith("cuda"):
        return ""
    import torch

    major, minor = torch.cuda.get_device_capability(torch.device(device))
    return f"{major}.{minor}"


def make_job(pair: Pair, problem_source: str, args: argparse.Namespace, arch: str) -> Job:
    return Job(problem_source=problem_source,
               candidate_source=pair.candidate.read_text(encoding="utf-8"),
               device=args.device, job_id=pair.name, problem_name=pair.problem.stem,
               correctness_trials=3, timing_budget_s=args.budget, warmup=2, min_samples=10,
               max_samples=100, stable_rel_ci=0.02, timeout_s=args.timeout,
               build_dir=str(args.build_root), cuda_arch=arch, baseline=args.baseline,
               window_cost=args.window_cost)


NATIVE_BUILD = re.compile(r"load_inline|cpp_extension|\bload\(")


def compiles_native(pair: Pair) -> bool:
    """Whether the candidate builds an extension: those builds are queued last, so the pool's
    workers are not all held by nvcc while the plain pairs wait to be measured."""
    return bool(NATIVE_BUILD.search(pair.candidate.read_text(encoding="utf-8")))


def lower_priority() -> None:
    """Nice this build thread, so the compilers it starts (they inherit a thread's nice
    value) yield the cores to the processes being timed: a timed process that loses its core
    in the middle of a call stretches that sample."""
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 15)


def gate_verdict(pair: Pair) -> dict[str, Any] | None:
    """The static gate against the problem as written: the model saw that, not the shrunk
    ``# cpu-sizes`` copy a CPU run times (a candidate that copied the problem's sizes would
    look as if it changed them)."""
    problem_source = pair.problem.read_text(encoding="utf-8")
    try:
        from cudal1_tui.analysis.gate import check_candidate, rejected
    except ImportError:
        return None
    findings = check_candidate(pair.candidate.read_text(encoding="utf-8"), problem_source)
    return {"verdict": "reject" if rejected(findings) else "pass",
            "codes": sorted({f"{f.code}:{f.severity}" for f in findings})}


def keyed_build_dir(pair: Pair, args: argparse.Namespace, arch: str) -> Path:
    """Where the build stage put this pair's extensions (the evaluator's own key)."""
    import torch

    from cudal1_evaluator.parent.build_cache import build_key, source_dir

    source = pair.candidate.read_text(encoding="utf-8")
    key = build_key(source, torch.__version__,
                    f"arch-{arch}" if arch else f"cpu-{platform.machine()}")
    return source_dir(Path(args.build_root), source) / key


class NextHarness:
    """The next pair's independent-harness process, started ahead so its torch import overlaps
    our evaluation of that pair; it learns its pair on stdin, so each pair still gets a fresh
    process of its own."""

    def __init__(self, arch: str, ahead: bool = True) -> None:
        self._env = dict(os.environ) | ({"TORCH_CUDA_ARCH_LIST": arch} if arch else {})
        self._proc: subprocess.Popen[str] | None = None
        self._ahead = ahead  # False: started when taken, never beside a measurement

    def start(self, ahead: bool = False) -> None:
        if ahead and not self._ahead:
            return
        if self._proc is None:
            self._proc = subprocess.Popen(
                [sys.executable, str(HARNESS), "--args-from-stdin"], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=self._env)

    def take(self) -> subprocess.Popen[str]:
        self.start()
        proc, self._proc = self._proc, None
        assert proc is not None
        return proc

    def close(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.communicate()
            self._proc = None


def independent(pair: Pair, problem_file: Path, args: argparse.Namespace, arch: str,
                harness: NextHarness) -> dict[str, Any]:
    """The independent harness in a fresh process, reusing the pair's build cache."""
    env: dict[str, str] = {}
    keyed = keyed_build_dir(pair, args, arch)
    if keyed.is_dir():
        env["TORCH_EXTENSIONS_DIR"] = str(keyed / "torch_extensions")
        env["TRITON_CACHE_DIR"] = str(keyed / "triton")
        env["TORCHINDUCTOR_CACHE_DIR"] = str(keyed / "inductor")
    out = args.build_root / f"{pair.name}.independent.json"
    argv = [str(problem_file), str(pair.candidate), "--device", args.device,
            "--budget-ms", str(int(args.budget * 100)), "--out", str(out),
            "--baseline", args.baseline]
    proc = harness.take()
    try:
        stdout, stderr = proc.communicate(json.dumps({"argv": argv, "env": env}) + "\n",
                                          timeout=args.timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return {"status": "timeout", "message": f"no result within {args.timeout:g} s"}
    if proc.returncode != 0 or not out.exists():
        tail = (stderr or stdout).strip().splitlines()[-3:]
        return {"status": "runtime_error", "message": " | ".join(tail)}
    row: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    row["reused_build"] = keyed.is_dir()  # else it compiled for itself, outside the timing
    return row


def our_row(result: Result, built: BuildOutcome) -> dict[str, Any]:
    ref = result.timing.get("reference")
    cand = result.timing.get("candidate")
    return {
        "status": result.status, "speedup": result.speedup, "reward": result.reward,
        "strict_speedup": getattr(result, "strict_speedup", None),
        "reference_ms": ref.median_ms if ref else None,
        "candidate_ms": cand.median_ms if cand else None,
        "build_status": built.status, "build_s": built.compile_time_s,
        "build_cached": result.build_cached, "compile_time_s": result.compile_time_s,
        "rejects": sorted({f.code for f in result.flags if f.severity == "reject"}),
        "settings_changed": sorted(result.settings_changed),
        "message": result.message.splitlines()[0][:200] if result.message else "",
        "wall_s": result.wall_time_s,
        "flags": sorted({f.code for f in result.flags}),
        "flag_reasons": {f.code: f.reason[:240] for f in result.flags},
        "timing": {side: {"median_ms": t.median_ms, "p10_ms": t.p10_ms, "p90_ms": t.p90_ms,
                          "mean_ms": t.mean_ms, "n": t.n, "outside_ms": t.outside_ms,
                          "at_floor": t.at_floor,
                          "samples_ms": [round(x, 4) for x in t.samples_ms]}
                   for side, t in result.timing.items()},
    }


def compare(ours: dict[str, Any], theirs: dict[str, Any]) -> dict[str, Any]:
    a, b = ours.get("speedup"), theirs.get("speedup")
    ratio = a / b if a and b else None
    return {"same_verdict": ours["status"] == theirs.get("status"),
            "ratio": round(ratio, 4) if ratio else None,
            "within_10pct": ratio is not None and abs(ratio - 1) <= 0.10}


def run_pair(pair: Pair, built: BuildOutcome, problem_source: str, problem_file: Path,
             args: argparse.Namespace, arch: str, harness: NextHarness) -> dict[str, Any]:
    started = time.monotonic()
    harness.start(ahead=True)  # its torch import overlaps our evaluation
    job = make_job(pair, problem_source, args, arch)
    # as the engine does: a build that failed for good is the verdict, nothing is re-built
    result = (build_verdict(job, built, []) if built.status in FINAL_BUILD_STATUSES
              else evaluate(job))
    ours = our_row(result, built)
    theirs = independent(pair, problem_file, args, arch, harness)
    expected_key = "expected" if args.device.startswith("cuda") else "expected_cpu"
    expected = pair.meta.get(expected_key) or pair.meta.get("expected")
    return {"name": pair.name, "tags": pair.meta.get("tags", []),
            "honest": pair.meta.get("honest"), "expected": expected,
            "gate": gate_verdict(pair), "ours": ours, "independent": theirs,
            **compare(ours, theirs), "as_expected": expected is None or ours["status"] == expected,
            "wall_s": round(time.monotonic() - started, 2)}


def fmt(x: float | None) -> str:
    return f"{x:.3g}" if isinstance(x, int | float) else "-"


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| pair | expected | ours | independent | our x | indep x | ratio | "
             "indep x, strict fp32 reference | ours ms (ref / cand) | indep ms | gate |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        gate = r["gate"]["verdict"] if r["gate"] else "-"
        ours, theirs = r["ours"], r["independent"]
        lines.append(f"| {r['name']} | {r['expected'] or '-'} | {ours['status']} | "
                     f"{theirs.get('status')} | {fmt(ours['speedup'])} | "
                     f"{fmt(theirs.get('speedup'))} | {fmt(r['ratio'])} | "
                     f"{fmt(theirs.get('strict_speedup'))} | {fmt(ours.get('reference_ms'))} / "
                     f"{fmt(ours.get('candidate_ms'))} | {fmt(theirs.get('reference_ms'))} / "
                     f"{fmt(theirs.get('candidate_ms'))} | {gate} |")
    return "\n".join(lines)


def summary(rows: list[dict[str, Any]], wall_s: float) -> str:
    both_ok = [r for r in rows if r["ours"]["status"] == "ok"
               and r["independent"].get("status") == "ok"]
    agree = sum(r["within_10pct"] for r in both_ok)
    return (f"{len(rows)} pairs in {wall_s:.0f} s ({60 * len(rows) / max(wall_s, 1e-9):.1f} "
            f"pairs/min); verdicts agree on {sum(r['same_verdict'] for r in rows)}; "
            f"{agree}/{len(both_ok)} of the pairs both call ok agree within 10%; "
            f"{sum(r['as_expected'] for r in rows)}/{len(rows)} as the manifest expects")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target", type=Path, help="a manifest.toml or a folder of pairs")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--only", nargs="*", default=[], help="name substrings to keep")
    parser.add_argument("--skip", nargs="*", default=[], help="name substrings to drop")
    parser.add_argument("--budget", type=float, default=1.0, help="timing budget per side, s")
    parser.add_argument("--baseline", choices=["defaults", "strict"], default="defaults",
                        help="the reference's precision in both harnesses (PyTorch's defaults: "
                             "cuDNN TF32 on; or strict fp32)")
    parser.add_argument("--window-cost", choices=["empty", "alone_intercept"], default="empty",
                        help="a window's fixed cost taken off: the empty windows', or also what a "
                             "window of calls pays once (Job.window_cost; being measured)")
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="per evaluation, s (each harness, after the build stage)")
    parser.add_argument("--build-timeout", type=float, default=600.0,
                        help="per build in the build stage, s (cold nvcc next to 11 others)")
    parser.add_argument("--workers", type=int, default=max(1, min(12, (os.cpu_count() or 1) - 4)),
                        help="parallel builds (cores less 4, kept for the measurements)")
    parser.add_argument("--build-root", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=Path("compare_gpu.json"))
    parser.add_argument("--skip-names", nargs="*", default=[],
                        help="exact pair names to drop (the pairs a run cut by --deadline-s "
                             "measured)")
    parser.add_argument("--shard", default="1/1",
                        help="K/N: every Nth pair from the Kth (one process per GPU)")
    parser.add_argument("--deadline-s", type=float, default=0.0,
                        help="start no pair after this many seconds (0: no deadline); the "
                             "rows so far are written and the rest named, for a later --skip")
    parser.add_argument("--builds-first", action="store_true",
                        help="every build done before the first measurement (no nvcc beside "
                             "the timing; the default measures plain pairs while nvcc runs)")
    parser.add_argument("--builds-only", action="store_true",
                        help="build the chosen pairs into --build-root and stop (shards of a "
                             "later run with the same --build-root then find them built)")
    args = parser.parse_args()
    # absolute: the harness processes and the evaluator's children run in dirs of their own
    root = args.build_root or Path(tempfile.mkdtemp(prefix="compare-builds-"))
    args.build_root = root.absolute()
    args.build_root.mkdir(parents=True, exist_ok=True)
    swept = lifetime.sweep_stale([args.build_root])  # a killed run's build locks stall builds
    if swept.summary():
        print(swept.summary(), flush=True)
    pairs = [p for p in chosen(load_pairs(args.target), args.device, args.only, args.skip)
             if p.name not in args.skip_names]
    shard, shards = (int(n) for n in args.shard.split("/"))
    pairs = pairs[shard - 1::shards]
    if not pairs:
        raise SystemExit("no pairs left after --device/--only/--skip")
    arch = cuda_arch(args.device)
    if arch:  # part of the build key, as in the build child
        os.environ["TORCH_CUDA_ARCH_LIST"] = arch
    started = time.monotonic()
    sources, files = {}, {}
    for p in pairs:
        text = p.problem.read_text(encoding="utf-8")
        sources[p.name] = shrink_for_cpu(text) if args.device == "cpu" else text
        files[p.name] = args.build_root / f"{p.name}.problem.py"
        files[p.name].write_text(sources[p.name], encoding="utf-8")
    print(f"{len(pairs)} pairs on {args.device}, builds with {args.workers} workers, "
          f"builds under {args.build_root}", flush=True)
    rows: list[dict[str, Any]] = []
    stop = threading.Event()
    os.environ.setdefault("MAX_JOBS", "1")  # one ninja job per build: workers = cores less 4
    pool = ThreadPoolExecutor(args.workers, initializer=lower_priority)
    builds: dict[str, Future[BuildOutcome]] = {
        p.name: pool.submit(build, replace(make_job(p, sources[p.name], args, arch),
                                           timeout_s=args.build_timeout), cancel=stop)
        for p in sorted(pairs, key=compiles_native)}
    by_name = {p.name: p for p in pairs}
    small = (os.cpu_count() or 1) < SMALL_HOST_CORES
    if args.builds_only:
        return builds_only(builds, by_name, pool, started)
    if args.builds_first and not small:
        print("every build finishes before the first measurement", flush=True)
        wait(list(builds.values()))
    if small:  # no core to spare: builds and torch imports would share the timing's cores
        print(f"{os.cpu_count()} cores: every build finishes before the first measurement, each "
              "harness process starts after our evaluation, and the evaluator starts no warm "
              "children", flush=True)
        warm.enabled = False  # they import torch just as the independent harness measures
        wait(list(builds.values()))
    harness = NextHarness(arch, ahead=not small)
    try:
        # in the order the builds finish: plain-PyTorch pairs are measured while nvcc runs
        for i, done in enumerate(as_completed(builds.values()), 1):
            pair = by_name[next(n for n, f in builds.items() if f is done)]
            if args.deadline_s and time.monotonic() - started > args.deadline_s:
                measured = {r["name"] for r in rows}
                left = [p.name for p in pairs if p.name not in measured]
                print(f"deadline of {args.deadline_s:g} s: {len(left)} pairs not measured: "
                      f"{' '.join(left)}\nmeasured (for --skip-names): {' '.join(measured)}",
                      flush=True)
                break
            built = done.result()
            row = run_pair(pair, built, sources[pair.name], files[pair.name], args, arch,
                           harness)
            rows.append(row)
            print(f"[{i}/{len(pairs)}] {pair.name}: ours "
                  f"{row['ours']['status']} "
                  f"{fmt(row['ours']['speedup'])}x, independent "
                  f"{row['independent'].get('status')} {fmt(row['independent'].get('speedup'))}x"
                  f" (build {built.status} {built.compile_time_s:.0f} s, {row['wall_s']:.0f} s)",
                  flush=True)
            write(args.out, args.device, arch, rows, time.monotonic() - started, done=False)
    finally:
        harness.close()
        stop.set()  # builds still running are cancelled (their children killed)
        pool.shutdown(wait=True, cancel_futures=True)
    wall = time.monotonic() - started
    print(table(rows))
    print(summary(rows, wall))
    write(args.out, args.device, arch, rows, wall, done=len(rows) == len(pairs))
    return 0


def builds_only(builds: dict[str, Future[BuildOutcome]], by_name: dict[str, Pair],
                pool: ThreadPoolExecutor, started: float) -> int:
    wait(list(builds.values()))
    pool.shutdown(wait=True)
    outcomes = {name: f.result() for name, f in builds.items()}
    for name, built in sorted(outcomes.items()):
        print(f"built {name}: {built.status} ({built.compile_time_s:.0f} s)", flush=True)
    native = sum(compiles_native(by_name[n]) for n in outcomes)
    print(f"{len(outcomes)} pairs built ({native} compile native code) in "
          f"{time.monotonic() - started:.0f} s", flush=True)
    return 0


def write(path: Path, device: str, arch: str, rows: list[dict[str, Any]], wall: float,
          *, done: bool) -> None:
    """Rewritten after every pair, so a run cut short still leaves its rows."""
    payload = {"device": device, "arch": arch, "complete": done, "wall_s": round(wall, 1),
               "pairs_per_min": round(60 * len(rows) / max(wall, 1e-9), 2), "rows": rows}
    path.write_text(json.dumps(payload, indent=1), encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
