"""Two corpus questions only a GPU answers, asked in one call (``gpu_session.sh diag``).

1. Why does ``rmsnorm_jit_script`` run slower inside our worker than in a plain process?
   TorchScript's GPU fuser compiles with NVRTC at run time and may leave ops unfused. Plain
   process, fuser on and off: do_bench median and the optimized graph's fusion groups. Inside
   our evaluator: copies of the candidate that, on their 40th call, stop the run with a message
   naming the fuser's state, the optimized graph's node kinds and input types, and the input's
   layout (the worker reports the exception's text), one of them handing the scripted function
   a clone of the input; then the plain candidate's speedup.
2. What does ``torch.compile(mode="reduce-overhead")`` do to an output the caller still holds
   when it calls again (CUDA graph trees)? Plain process: three calls holding every output;
   whether the addresses repeat and whether reading the first output raises.

    PYTHONPATH=. python benchmarks/gpu_diag.py [--device cuda]
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
GRAPH_PROBLEM = ROOT / "examples" / "gemm_bias_silu.py"
GRAPH_CANDIDATE = ROOT / "benchmarks" / "corpus" / "candidates" / \
    "gemm_silu_compile_reduce_overhead.py"

GRAPH_SUMMARY = '''
def _graph_summary(graph) -> str:
    kinds = {}
    for node in graph.nodes():
        kinds[node.kind()] = kinds.get(node.kind(), 0) + 1
    return ("kinds=" + ",".join(f"{k}:{n}" for k, n in sorted(kinds.items())) + " inputs="
            + "; ".join(str(i.type()) for i in graph.inputs()))
'''

PROBE = GRAPH_SUMMARY + '''
_calls = [0]


def _fuser_state(x, weight) -> str:
    parts = []
    for name in ("_jit_texpr_fuser_enabled", "_jit_can_fuse_on_gpu",
                 "_get_graph_executor_optimize"):
        try:
            parts.append(f"{name}={getattr(torch._C, name)()}")
        except BaseException as exc:  # the guard may refuse
            parts.append(f"{name}:{type(exc).__name__}")
    parts.append(f"grad={torch.is_grad_enabled()} inference={torch.is_inference_mode_enabled()}"
                 f" x: contiguous={x.is_contiguous()} stride={x.stride()} "
                 f"offset={x.storage_offset()} leaf={x.is_leaf} rg={x.requires_grad} "
                 f"weight rg={weight.requires_grad}")
    try:
        parts.append(_graph_summary(torch.jit.last_executed_optimized_graph()))
    except BaseException as exc:
        parts.append(f"graph:{type(exc).__name__}:{exc}")
    return " ".join(parts)


_forward = ModelNew.forward


def _probed(self, x):
    out = rms_norm(x.clone(), self.weight, self.eps) if CLONE else _forward(self, x)
    _calls[0] += 1
    if _calls[0] == 40:
        raise RuntimeError("JITDIAG " + _fuser_state(x, self.weight))
    return out


ModelNew.forward = _probed
'''

PLAIN = GRAPH_SUMMARY + r'''
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
    graph = _graph_summary(torch.jit.last_executed_optimized_graph())
    r = tt.do_bench(lambda: ref(*x), return_mode="median")
    c = tt.do_bench(lambda: new(*x), return_mode="median")
print(f"plain fuser={sys.argv[1]}: ref {r:.4f} ms cand {c:.4f} ms speedup {r / c:.3f}x {graph}")
'''

CUDAGRAPH = r'''
import sys, runpy, torch
prob = runpy.run_path(sys.argv[1]); cand = runpy.run_path(sys.argv[2])
torch.manual_seed(0)
new = cand["ModelNew"](*prob["get_init_inputs"]()).cuda()
held = []
with torch.no_grad():
    for i in range(4):
        x = [t.cuda() for t in prob["get_inputs"]()]
        out = new(*x)
        torch.cuda.synchronize()
        held.append(out)
        states = []
        for j, h in enumerate(held):
            try:
                states.append(f"{j}:{h.untyped_storage().data_ptr():#x}")
            except RuntimeError as exc:
                states.append(f"{j}:raises({str(exc)[:60]})")
        print(f"after call {i + 1}: " + " ".join(states))
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
        for label, source in (("probe", candidate + "\nCLONE = False\n" + PROBE),
                              ("probe on a clone", candidate + "\nCLONE = True\n" + PROBE),
                              ("plain", candidate)):
            job = Job(problem_source=problem, candidate_source=source, device=device,
                      problem_name="rmsnorm", timing_budget_s=1.0, correctness_trials=3,
                      build_dir=build_dir, timeout_s=300)
            result = evaluate(job)
            ref, cand = result.timing.get("reference"), result.timing.get("candidate")
            times = (f"ref {ref.median_ms:.4f} ms cand {cand.median_ms:.4f} ms"
                     if ref and cand and ref.n and cand.n else "")
            print(f"worker {label}: {result.status} speedup {result.speedup} {times} "
                  f"{(result.message or '')[:1500]}", flush=True)


def cudagraph(device: str) -> None:
    if device != "cuda":
        print("the CUDA-graph check needs CUDA")
        return
    done = subprocess.run([sys.executable, "-c", CUDAGRAPH, str(GRAPH_PROBLEM),
                           str(GRAPH_CANDIDATE)], capture_output=True, text=True, timeout=300,
                          check=False)
    print(done.stdout.strip() or done.stderr.strip()[-800:], flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    cudagraph(args.device)
    plain(args.device)
    inside(args.device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
