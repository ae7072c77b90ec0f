"""Scaling over GPUs: the corpus through `cudal1-tui run --headless` on 1, 2, … GPUs.

Every problem of the corpus (benchmarks/corpus/manifest.toml) gets one session; the "model" is
our replay server over real HTTP, answering each problem's prompts with that problem's corpus
candidates in turn (keyed by a line of the problem), so each width evaluates the same
candidates. Each width is one real `cudal1-tui run ... --headless --gpus 0-(W-1)` process with
its own sessions dir; its `--report-json` gives candidates a minute, how busy the lanes and
the build threads were, and the bottleneck. Speedups are matched by candidate code against
the narrowest width's.

Builds: `--builds warm` (the default) compiles every load_inline candidate once, before any
width runs, into a build cache all widths share, so the widths compare evaluation throughput
(as a session re-evaluating known kernels, or an RL pipeline's steady state, sees it);
`--builds cold` gives each width a fresh cache (nvcc inside the measured time).

    PYTHONUNBUFFERED=1 python benchmarks/scaling.py --widths 1,2 --out "$OUT"
    python benchmarks/scaling.py --widths 4 --out "$OUT"   # adds a width to $OUT/scaling.json
    python benchmarks/scaling.py --device cpu --widths 1 --problems 2 --candidates 1  # dry run

Widths already in the results file (OUT/scaling.json, or `--results`) are kept, so a run per
width fits a time-limited command; the table covers them all:

    python benchmarks/scaling.py --widths 1 --build-dir build/scaling \
        --results build/scaling.json --out "$OUT"
    python benchmarks/scaling.py --widths 2 --build-dir build/scaling \
        --results build/scaling.json --out "$OUT"     # prebuild: cache hits

Needs the app installed (`cudal1-tui` on PATH, or run from the
repository root) and, on CUDA, nvcc/ninja/g++ for the load_inline candidates.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import tomllib
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cudal1_tui.cli.run_report import code_sha  # noqa: E402
from cudal1_tui.replay import ReplayConfig, ReplayServer, Reply  # noqa: E402

MANIFEST = ROOT / "benchmarks" / "corpus" / "manifest.toml"
AGREE = 0.10  # speedups within ±10 % of the narrowest width's count as agreeing


def pairs_for(device: str, manifest: Path) -> dict[str, list[dict[str, Any]]]:
    """The corpus pairs that can run on ``device`` and pass the gate, by problem file."""
    by_problem: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for pair in tomllib.loads(manifest.read_text(encoding="utf-8"))["pair"]:
        runs_here = pair["device"] in ("any", device)
        if runs_here and pair["gate"] == "pass":
            by_problem[pair["problem"]].append(pair)
    return dict(sorted(by_problem.items()))


def key_line(source: str, others: list[str]) -> str:
    """The longest indented line of ``source`` found in no other problem: it keys the
    replay (the prompt holds the problem's code, sizes aside)."""
    lines = {ln.strip() for ln in source.splitlines() if ln.startswith((" ", "\t"))}
    unique = [ln for ln in lines if ln and not any(ln in o for o in others)]
    if not unique:
        raise SystemExit("no line tells this problem from the others")
    return max(unique, key=len)


def replies(by_problem: dict[str, list[dict[str, Any]]]) -> tuple[list[Reply], dict[str, str]]:
    """Replies keyed per problem, and code sha -> pair name (to match outcomes)."""
    sources = {p: (ROOT / p).read_text(encoding="utf-8") for p in by_problem}
    out: list[Reply] = []
    names: dict[str, str] = {}
    for problem, pairs in by_problem.items():
        key = key_line(sources[problem], [s for p, s in sources.items() if p != problem])
        for pair in pairs:
            code = (ROOT / pair["candidate"]).read_text(encoding="utf-8")
            names[code_sha(code.strip() + "\n")] = pair["name"]
            names[code_sha(code)] = pair["name"]
            out.append(Reply(content="## Performance Analysis\n\nSee the code.\n\n"
                             "## Algorithm Design\n\nAs written.\n\n"
                             f"## Code Implementation\n\n```python\n{code}```\n",
                             reasoning=f"corpus pair {pair['name']}", key=key))
    return out, names


def cuda_arch() -> str:
    """The GPU's compute capability as the app's probe writes it (``9.0``): the build key."""
    done = subprocess.run([sys.executable, "-c", "import torch; p = torch.cuda."
                           "get_device_properties(0); print(f'{p.major}.{p.minor}')"],
                          capture_output=True, text=True, check=True)
    return done.stdout.strip().splitlines()[-1]


def prebuild(by_problem: dict[str, list[dict[str, Any]]], device: str, build_dir: Path) -> None:
    """Every candidate that compiles, built once into ``build_dir`` (the sandboxed build the
    app's build stage runs), in parallel on the CPU cores."""
    from concurrent.futures import ThreadPoolExecutor

    from cudal1_evaluator import launch
    from cudal1_tui.judging import make_job, needs_build

    arch = cuda_arch() if device == "cuda" else ""
    jobs = [make_job((ROOT / problem).read_text(encoding="utf-8"), code, device=device,
                     build_dir=str(build_dir), cuda_arch=arch, timeout_s=900.0)
            for problem, pairs in by_problem.items() for pair in pairs
            if needs_build(code := (ROOT / pair["candidate"]).read_text(encoding="utf-8"))]
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=max(1, (os.cpu_count() or 2) - 1)) as pool:
        outcomes = list(pool.map(launch.build, jobs))
    failed = sum(not o.ok for o in outcomes)
    print(f"prebuilt {len(jobs)} candidate(s) in {time.monotonic() - started:.0f} s "
          f"({failed} failed to build, as some corpus pairs should)", flush=True)


def run_width(width: int, args: argparse.Namespace, base_url: str, work: Path,
              problems: list[Path], build_dir: Path, *,
              settings: Mapping[str, str] | None = None,
              need_report: bool = True) -> dict[str, Any]:
    """One `cudal1-tui run --headless` on ``width`` lanes; its report. ``settings``: more
    environment (``CUDAL1_*`` settings) for the run; ``need_report=False``: a run that
    wrote no report gives its exit code and wall time alone (its log is work/run-W.log)."""
    report = work / f"report-{width}.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUDAL1_", "OPENAI_"))}
    env.update(CUDAL1_CONFIG=str(work / "absent.toml"),
               CUDAL1_BUILD_DIR=str(build_dir),
               CUDAL1_CANDIDATES_PER_ROUND=str(args.candidates), CUDAL1_RETRIES="0",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])))
    env.update(settings or {})
    command = [sys.executable, "-m", "cudal1_tui", "run", *map(str, problems), "--headless",
               "--rounds", str(args.rounds), "--no-builtin", "--base-url", base_url,
               "--sessions-dir", str(work / f"sessions-{width}"), "--report-json", str(report),
               "--cluster", "local"]
    if args.device == "cpu":
        command += ["--device", "cpu", "--sizes", "cpu"]
    else:
        command += ["--gpus", f"0-{width - 1}" if width > 1 else "0"]
    if args.parallel:
        command += ["--parallel", str(args.parallel)]
    started = time.monotonic()
    done = subprocess.run(command, env=env, cwd=work, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, check=False)
    (work / f"run-{width}.log").write_text(done.stderr + done.stdout, encoding="utf-8")
    if not report.is_file() and need_report:
        raise SystemExit(f"width {width}: the run wrote no report (exit {done.returncode}):\n"
                         + done.stderr[-3000:])
    data: dict[str, Any] = \
        json.loads(report.read_text(encoding="utf-8")) if report.is_file() else {}
    data["exit_code"], data["wall_s"] = done.returncode, round(time.monotonic() - started, 1)
    return data


def agreement(base: dict[str, Any], other: dict[str, Any], names: dict[str, str]) -> str:
    """How the speedups of verified candidates compare with the narrowest width's."""
    def speeds(report: dict[str, Any]) -> dict[str, float]:
        return {names.get(o["code_sha"], o["code_sha"]): o["speedup"] for o in report["outcomes"]
                if o["status"] == "ok" and o["speedup"]}
    first, second = speeds(base), speeds(other)
    shared = sorted(set(first) & set(second))
    if not shared:
        return "—"
    ratios = [second[n] / first[n] for n in shared]
    within = sum(abs(r - 1) <= AGREE for r in ratios)
    worst = max(ratios, key=lambda r: abs(r - 1))
    return f"{within}/{len(shared)} within ±{AGREE:.0%} (worst {worst:.2f}×)"


def verdicts_agree(base: dict[str, Any], other: dict[str, Any], names: dict[str, str]) -> str:
    def verdicts(report: dict[str, Any]) -> dict[str, set[str]]:
        out: dict[str, set[str]] = defaultdict(set)
        for o in report["outcomes"]:
            out[names.get(o["code_sha"], o["code_sha"])].add(o["status"])
        return out
    first, second = verdicts(base), verdicts(other)
    shared = set(first) & set(second)
    same = sum(first[n] == second[n] for n in shared)
    return f"{same}/{len(shared)}"


def table(results: dict[str, dict[str, Any]], names: dict[str, str]) -> str:
    widths = sorted(results, key=int)
    base = results[widths[0]]
    lines = ["| GPUs | candidates | timed | wall s | candidates/min | scaling | lanes busy | "
             "lane s: probes / evaluations | an evaluation, s (median / max) | builds busy | "
             "bottleneck | same verdicts | speedups vs narrowest |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for w in widths:
        r = results[w]
        scale = r["per_minute"] / base["per_minute"] if base["per_minute"] else 0.0
        lines.append(
            f"| {w} | {r['candidates']} | {r['timed']} | {r['elapsed_s']:.0f} | "
            f"{r['per_minute']:.2f} | {scale:.2f}× | {r['lanes_use']['share']:.0%} | "
            f"{lane_kinds(r)} | {evaluation_spread(r)} | "
            f"{r['builds_use']['share']:.0%} | {r['bottleneck']} | "
            f"{verdicts_agree(base, r, names)} | {agreement(base, r, names)} |")
    return "\n".join(lines)


def lane_kinds(report: dict[str, Any]) -> str:
    """Lane seconds held by the problems' reference probes and by evaluations (reports
    written before the split: –)."""
    total: dict[str, float] = defaultdict(float)
    for lane in report.get("lanes", []):
        for kind, busy in (lane.get("busy_s_by_kind") or {}).items():
            total[kind] += busy
    return f"{total['probe']:.0f} / {total['evaluation']:.0f}" if total else "–"


def evaluation_spread(report: dict[str, Any]) -> str:
    spread = report.get("evaluation_s") or {}
    return f"{spread['median']:.1f} / {spread['max']:.1f}" if spread else "–"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--widths", default="1,2", help="GPU counts to run, e.g. 1,2,4,8")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                        help="cpu: a dry run of the plumbing (one lane; numbers meaningless)")
    parser.add_argument("--rounds", type=int, default=1, help="rounds per problem")
    parser.add_argument("--candidates", type=int, default=3,
                        help="candidates per round (model slots) per problem")
    parser.add_argument("--problems", type=int, default=0,
                        help="only the first N problems of the corpus (0: all)")
    parser.add_argument("--parallel", type=int, default=0,
                        help="problems at once (default: the app's, 2 per lane, at least 4)")
    parser.add_argument("--timing-budget", type=float, default=0.0,
                        help="seconds of timing per candidate (0: the app's default); a "
                             "headless evaluation takes 30-35 s on an H200 at the default")
    parser.add_argument("--latency", type=float, default=0.0,
                        help="seconds between streamed chunks: a slower model server")
    parser.add_argument("--builds", choices=("warm", "cold"), default="warm",
                        help="warm: every candidate built once before the widths run, one "
                             "cache for all; cold: a fresh build cache per width")
    parser.add_argument("--build-dir", type=Path, default=None,
                        help="the warm build cache (default: a temp dir); a kept one makes a "
                             "second call's prebuild a cache hit")
    parser.add_argument("--results", type=Path, default=None,
                        help="the JSON the widths accumulate in (default: OUT/scaling.json); "
                             "keep it outside OUT to add widths over several calls")
    parser.add_argument("--manifest", type=Path, default=MANIFEST)
    parser.add_argument("--out", type=Path, default=Path("."))
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    widths = [int(w) for w in args.widths.split(",") if w.strip()]
    if args.device == "cpu" and widths != [1]:
        raise SystemExit("--device cpu has one lane: use --widths 1")
    by_problem = pairs_for(args.device, args.manifest)
    if args.problems:
        by_problem = dict(list(by_problem.items())[:args.problems])
    served, names = replies(by_problem)
    problems = [ROOT / p for p in by_problem]
    args.out.mkdir(parents=True, exist_ok=True)
    saved = args.results or args.out / "scaling.json"
    saved.parent.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict[str, Any]] = \
        json.loads(saved.read_text(encoding="utf-8")) if saved.is_file() else {}
    print(f"{len(problems)} problems, {len(served)} corpus candidates, "
          f"{args.rounds}×{args.candidates} candidates per problem, {args.builds} builds",
          flush=True)
    with ReplayServer(ReplayConfig(replies=tuple(served), model="scaling-replay",
                                   latency_s=args.latency)) as server, \
            tempfile.TemporaryDirectory(prefix="scaling-") as tmp:
        shared = (args.build_dir or Path(tmp) / "build").absolute()
        if args.builds == "warm":
            prebuild(by_problem, args.device, shared)
        for width in widths:
            work = Path(tmp) / f"w{width}"
            work.mkdir()
            builds = shared if args.builds == "warm" else work / "build"
            budget = {"CUDAL1_TIMING_BUDGET_S": str(args.timing_budget)} \
                if args.timing_budget else None
            result = run_width(width, args, server.base_url, work, problems, builds,
                               settings=budget)
            result["builds"] = args.builds
            results[str(width)] = result
            saved.write_text(json.dumps(results, indent=2), encoding="utf-8")
            print(f"width {width}: {result['candidates']} candidates in "
                  f"{result['elapsed_s']:.0f} s = {result['per_minute']:.2f}/min, "
                  f"bottleneck: {result['bottleneck']} (exit {result['exit_code']})", flush=True)
            (args.out / f"run-{width}.log").write_text(
                (work / f"run-{width}.log").read_text(encoding="utf-8"), encoding="utf-8")
    print()
    print(table(results, names))
    if saved != args.out / "scaling.json":
        (args.out / "scaling.json").write_text(json.dumps(results, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
