"""Why does ``rmsnorm_jit_script`` run slower inside our worker than in a plain process?

Issue #11 lead: TorchScript's GPU fuser compiles with NVRTC at run time and falls back to
unfused ops when that fails. This script asks, on the GPU host:

* plain process, fuser on and off: do_bench median, and whether the optimized graph holds a
  fusion group (``prim::TensorExprGroup``/``prim::FusionGroup``);
* inside our evaluator: a copy of the candidate that, on its 40th call, stops the run with a
  message naming the fuser's state and the fusion groups of its last optimized graph (the
  worker reports the exception's text), and the plain candidate's speedup.

    PYTHONPATH=. python benchmarks/jit_diag.py [--device cuda]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cudal1_evaluator.launch import evaluate  # noqa: E402
from cudal1_evaluator.schema import Job  # noqa: E402

PROBLEM = ROOT / "examples" / "rmsnorm.py"
CANDIDATE = ROOT / "benchmarks" / "corpus" / "candidates" / "rmsnorm_jit_script.py"

PROBE = '''
_calls = [0]


def _fuser_state() -> str:
    parts = []
    for name in ("_jit_texpr_fuser_enabled", "_jit_can_fuse_on_gpu",
                 "_get_graph_executor_optimize"):
        try:
            parts.append(f"{name}={getattr(torch._C, name)()}")
        except BaseException as exc:  # the guard may refuse
            parts.append(f"{name}:{type(exc).__name__}")
    try:
        graph = str(torch.jit.last_executed_optimized_graph())
        kinds = sorted({line.split("prim::")[1].split("_")[0].split("[")[0]
                        for line in graph.splitlines() if "Group" in line and "prim::" in line})
        parts.append(f"groups={kinds or 'none'} nodes={graph.count(chr(10))}")
    except BaseException as exc:
        parts.append(f"graph:{type(exc).__name__}:{exc}")
    return " ".join(parts)


_forward = ModelNew.forward


def _probed(self, x):
    out = _forward(self, x)
    _calls[0] += 1
    if _calls[0] == 40:
        raise RuntimeError("JITDIAG " + _fuser_state())
    return out


ModelNew.forward = _probed
'''

PLAIN = r'''
import sys, runpy, torch, triton.testing as tt
if sys.argv[1] == "off":
    torch._C._jit_set_texpr_fuser_enabled(False)
prob = runpy.run_path(sys.argv[2]); cand = runpy.run_path(sys.argv[3])
torch.manual_seed(0)
init = prob["get_init_inputs"](); ref = prob["Model"](*init).cuda()
torch.manual_seed(0)
new = cand["ModelNew"](*init).cuda()
x = [t.cuda() for t in prob["get_inputs"]()]
with torch.no_grad():
    for _ in range(40):
        new(*x)
    graph = str(torch.jit.last_executed_optimized_graph())
    groups = sorted({l.split("prim::")[1].split("_")[0].split("[")[0] for l in graph.splitlines()
                     if "Group" in l and "prim::" in l})
    r = tt.do_bench(lambda: ref(*x), return_mode="median")
    c = tt.do_bench(lambda: new(*x), return_mode="median")
print(f"plain fuser={sys.argv[1]}: ref {r:.4f} ms cand {c:.4f} ms speedup {r / c:.3f}x "
      f"groups={groups or 'none'}")
'''


def plain(device: str) -> None:
    if device != "cuda":
        print("plain runs need CUDA (do_bench)")
        return
    for mode in ("on", "off"):
        done = subprocess.run([sys.executable, "-c", PLAIN, mode, str(PROBLEM), str(CANDIDATE)],
                              capture_output=True, text=True, timeout=300, check=False)
        print(done.stdout.strip() or done.stderr.strip()[-800:], flush=True)


def inside(device: str) -> None:
    problem, candidate = PROBLEM.read_text(), CANDIDATE.read_text()
    if device == "cpu":
        from cudal1_tui.problem.sizing import shrink_for_cpu

        problem = shrink_for_cpu(problem)
    with tempfile.TemporaryDirectory(prefix="jitdiag-") as build_dir:
        for label, source in (("probe", candidate + PROBE), ("plain", candidate)):
            job = Job(problem_source=problem, candidate_source=source, device=device,
                      problem_name="rmsnorm", timing_budget_s=1.0, correctness_trials=3,
                      build_dir=build_dir, timeout_s=300)
            result = evaluate(job)
            ref, cand = result.timing.get("reference"), result.timing.get("candidate")
            times = (f"ref {ref.median_ms:.4f} ms cand {cand.median_ms:.4f} ms"
                     if ref and cand and ref.n and cand.n else "")
            print(f"worker {label}: {result.status} speedup {result.speedup} {times} "
                  f"{(result.message or '')[:600]}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    plain(args.device)
    inside(args.device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
