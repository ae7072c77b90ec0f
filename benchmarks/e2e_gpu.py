"""A headless session end to end on a CUDA GPU, on 3 examples.

Each session runs the built-in proposer (round 1) and then "model" rounds whose replies are
hand-written CUDA kernels (benchmarks/candidates/*_cuda.py) served by our own OpenAI-compatible
replay server over real HTTP, so the whole loop runs: prompt → stream → parse → gate → compile →
verify → time → record → accept. Prints a table per session and a summary.

Run from the repository root on an H100/H200 (needs the app's dependencies; see
docs/benchmarks/e2e.md for the wheels carried to the GPU host):
    PYTHONUNBUFFERED=1 python benchmarks/e2e_gpu.py --out "$OUT"
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cudal1_tui.config import Settings  # noqa: E402
from cudal1_tui.engine.acceptance import accept_best  # noqa: E402
from cudal1_tui.engine.engine import Engine  # noqa: E402
from cudal1_tui.replay import ReplayConfig, ReplayServer, Reply  # noqa: E402
from cudal1_tui.store.export import ExportOptions, export_sessions  # noqa: E402

CANDIDATES = ROOT / "benchmarks" / "candidates"

# problem -> (a snippet of its reference code that keys the replay, the CUDA candidate, analysis)
PROBLEMS: dict[str, tuple[str, str, str]] = {
    "diag_matmul": (
        "torch.diag(a) @ b", "diag_matmul_cuda",
        "The reference materialises an n×n diagonal matrix and runs a dense O(n²m) GEMM, while "
        "row i of the result is a[i]·B[i,:]. A row-scaling kernel reads B once and writes once: "
        "memory-bound at HBM bandwidth instead of compute-bound on a useless GEMM.",
    ),
    "gelu_swish_chain": (
        "F.gelu(x) * gate", "gelu_swish_chain_cuda",
        "Eager runs sigmoid, scale, gelu, multiply, scale and add as separate kernels, each a "
        "full pass over HBM. One fused float4 kernel reads x once and writes y once.",
    ),
    "rmsnorm": (
        "x.pow(2).mean", "rmsnorm_cuda",
        "Eager computes pow, mean, add, rsqrt and two multiplies as separate passes. One block "
        "per row reduces the sum of squares in registers and shared memory, then scales: two "
        "reads of the row (the second mostly from L2) and one write.",
    ),
}


def reply_for(problem: str) -> Reply:
    key, cand, analysis = PROBLEMS[problem]
    code = (CANDIDATES / f"{cand}.py").read_text()
    content = (
        f"## Performance Analysis\n\n{analysis}\n\n"
        "## Algorithm Design\n\nOne CUDA kernel through load_inline, launched on the current "
        "stream, fp32 throughout, vectorised loads where the row length allows.\n\n"
        f"## Code Implementation\n\n```python\n{code}```\n"
    )
    return Reply(content=content, reasoning=f"The earlier variants show what eager costs for "
                 f"{problem}; a fused kernel should beat them.", key=key)


def run_session(problem: str, base_url: str, sessions: Path, rounds: int,
                device: str) -> dict[str, Any]:
    settings = Settings(base_url=base_url, device=device, candidates_per_round=1,
                        sessions_dir=str(sessions), timing_budget_s=3.0, correctness_trials=3)
    events: list[Any] = []
    engine = Engine(ROOT / "examples" / f"{problem}.py", settings, emit=events.append,
                    sizes="full" if device == "cuda" else "cpu")
    started = time.monotonic()
    engine.open()
    for _ in range(rounds):
        summary = engine.run_round()
        accept_best(engine, summary)
        if summary.cancelled or summary.nothing_to_do:
            break
    elapsed = time.monotonic() - started
    rows = []
    for record in engine.records():
        result = record.result
        candidate, reference = result.timing.get("candidate"), result.timing.get("reference")
        rows.append({
            "round": record.round, "source": record.source, "status": record.status,
            "speedup": record.speedup, "reward": record.reward, "decision": record.decision,
            "candidate_ms": candidate.median_ms if candidate else None,
            "reference_ms": reference.median_ms if reference else None,
            "flags": [f.code for f in result.flags],
            "message": (result.message or record.parse_error or "")[:160],
            "compile_time_s": result.compile_time_s,
        })
    accepted = engine.accepted()
    out = {"problem": problem, "session": str(engine.session_path), "elapsed_s": elapsed,
           "device": engine.device, "reference_ms": engine.reference_ms,
           "accepted": accepted.source if accepted else None,
           "accepted_speedup": accepted.speedup if accepted else None, "candidates": rows}
    engine.close()
    return out


def keep(session: dict[str, Any], out: Path) -> None:
    """The session's own files and its exports under OUT/sessions/<problem>/: what a user of
    this GPU run would take away (the accepted module, training rows, the raw trace)."""
    path, dest = Path(session["session"]), out / "sessions" / session["problem"]
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("session.json", "trace.jsonl"):
        shutil.copy(path / name, dest / name)
    for fmt, name in (("module", f"optimized_{session['problem']}.py"),
                      ("trl", "trl.jsonl"), ("openai-chat", "openai-chat.jsonl")):
        try:
            result = export_sessions([str(path)], fmt, ExportOptions(), dest / name)
            session.setdefault("exports", {})[fmt] = result.rows
        except Exception as exc:  # an export problem is reported, the numbers stay
            session.setdefault("exports", {})[fmt] = f"{type(exc).__name__}: {exc}"


def show(session: dict[str, Any]) -> str:
    lines = [f"\n### {session['problem']} — {len(session['candidates'])} candidates in "
             f"{session['elapsed_s']:.0f} s, accepted: {session['accepted']} "
             f"({session['accepted_speedup'] or 0:.2f}×)\n",
             "| round | source | status | speedup | candidate ms | reference ms | flags | note |",
             "|---|---|---|---|---|---|---|---|"]
    for r in session["candidates"]:
        speed = f"{r['speedup']:.2f}×" if r["speedup"] else "—"
        cms = f"{r['candidate_ms']:.3f}" if r["candidate_ms"] else "—"
        rms = f"{r['reference_ms']:.3f}" if r["reference_ms"] else "—"
        note = r["message"].replace("|", "/").replace("\n", " ")[:80]
        lines.append(f"| {r['round']} | {r['source']} | {r['status']} | {speed} | {cms} | {rms} "
                     f"| {','.join(r['flags'])} | {note} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("."))
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--problems", nargs="*", default=list(PROBLEMS))
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                        help="cpu: a dry run of the plumbing at CPU sizes (the CUDA kernels "
                             "cannot run there, numbers meaningless)")
    args = parser.parse_args()
    sessions = Path(tempfile.mkdtemp(prefix="e2e-sessions-"))
    replies = tuple(reply_for(p) for p in args.problems)
    report: list[dict[str, Any]] = []
    with ReplayServer(ReplayConfig(replies=replies, model="cuda-replay")) as server:
        for problem in args.problems:
            try:
                session = run_session(problem, server.base_url, sessions, args.rounds,
                                      args.device)
            except Exception as exc:  # one broken session must not hide the others
                session = {"problem": problem, "error": f"{type(exc).__name__}: {exc}",
                           "candidates": [], "elapsed_s": 0.0, "accepted": None,
                           "accepted_speedup": None}
            if "error" not in session:
                keep(session, args.out)
            report.append(session)
            print(show(session) if "error" not in session else f"\n{problem}: {session['error']}",
                  flush=True)
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / "e2e_gpu.json").write_text(json.dumps(report, indent=2, default=str))
    print("\n==== summary ====")
    for s in report:
        print(show(s) if "error" not in s else f"{s['problem']}: {s['error']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
