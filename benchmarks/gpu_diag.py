"""Two corpus questions only a GPU answers, asked in one call (``gpu_session.sh diag``).

1. Why does ``rmsnorm_jit_script`` run slower inside our worker than in a plain process?
   TorchScript's GPU fuser compiles with NVRTC at run time and may leave ops unfused. Plain
   process, fuser on and off: do_bench median and the optimized graph's fusion groups. Inside
   our evaluator: copies of the candidate that, on their 12th call (the first timed burst), stop
   the run with a message
   naming the fuser's state, the optimized graph's node kinds and input types, and the input's
   layout (the worker reports the exception's text), one of them handing the scripted function
   a clone of the input; then the plain candidate's speedup.
2. What does ``torch.compile(mode="reduce-overhead")`` do to an output the caller still holds
   when it calls again (CUDA graph trees)? Plain process: three calls holding every output;
   whether the addresses repeat and whether reading the first output raises. Inside our
   evaluator: a copy that makes Inductor raise instead of skipping CUDA graphs
   (``cudagraph_or_error``) and, on its 12th call, stops the run with its outputs' addresses.
3. Why is ``conv_bn_fold_eval`` (honest) sometimes rejected as ``timing_unaccounted`` on an
   H100? Three evaluations in a row: each side's wall time per call outside the timed calls
   and the threads that appeared.

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

CONV_PROBLEM = ROOT / "examples" / "conv_bn_relu_eval.py"
CONV_CANDIDATE = ROOT / "benchmarks" / "corpus" / "candidates" / "conv_bn_fold_eval.py"

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
    parts.append(f"jit_enabled={torch.jit._state._enabled.enabled}")
    for name in ("_jit_texpr_fuser_enabled", "_jit_can_fuse_on_gpu",
                 "_get_graph_executor_optimize", "_jit_get_num_profiled_runs"):
        try:
            parts.append(f"{name}={getattr(torch._C, name)()}")
        except BaseException as exc:  # the guard may refuse
            parts.append(f"{name}:{type(exc).__name__}")
    parts.append(f"grad={torch.is_grad_enabled()} inference={torch.is_inference_mode_enabled()}"
                 f" x: contiguous={x.is_contiguous()} stride={x.stride()} "
                 f"offset={x.storage_offset()} align={x.data_ptr() % 256} leaf={x.is_leaf} "
                 f"rg={x.requires_grad} "
                 f"weight rg={weight.requires_grad}")
    try:
        graph = torch.jit.last_executed_optimized_graph()
        parts.append(_graph_summary(graph) + " GRAPH " + str(graph)[:2500])
    except BaseException as exc:
        parts.append(f"graph:{type(exc).__name__}:{exc}")
    return " ".join(parts)


_forward = ModelNew.forward


def _probed(self, x):
    out = rms_norm(x.clone(), self.weight, self.eps) if CLONE else _forward(self, x)
    _calls[0] += 1
    if _calls[0] == 12:
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

GRAPH_PROBE = '''
import torch._inductor.config as _inductor_config
from torch._dynamo.utils import counters as _counters

_inductor_config.triton.cudagraph_or_error = True  # raise where CUDA graphs would be skipped
_ptrs = []
_graph_forward = ModelNew.forward


def _graph_probed(self, x):
    out = _graph_forward(self, x)
    _ptrs.append(out.untyped_storage().data_ptr())
    if len(_ptrs) == 12:
        raise RuntimeError("GRAPHDIAG ptrs=" + ",".join(f"{p:#x}" for p in _ptrs)
                           + f" inductor={dict(_counters['inductor'])} "
                           f"grad={torch.is_grad_enabled()} "
                           f"inference={torch.is_inference_mode_enabled()}")
    return out


ModelNew.forward = _graph_probed
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


def _job(problem: str, source: str, name: str, device: str, build_dir: str) -> Job:
    return Job(problem_source=problem, candidate_source=source, device=device,
               problem_name=name, timing_budget_s=1.0, correctness_trials=3,
               build_dir=build_dir, timeout_s=300)


def _evaluate(label: str, problem: str, source: str, name: str, device: str,
              build_dir: str) -> None:
    result = evaluate(_job(problem, source, name, device, build_dir))
    ref, cand = result.timing.get("reference"), result.timing.get("candidate")
    times = (f"ref {ref.median_ms:.4f} ms cand {cand.median_ms:.4f} ms"
             if ref and cand and ref.n and cand.n else "")
    print(f"worker {label}: {result.status} speedup {result.speedup} {times} "
          f"{(result.message or '')[:4000]}", flush=True)


def _source(path: Path, device: str) -> str:
    text = path.read_text()
    if device == "cpu":
        from cudal1_tui.problem.sizing import shrink_for_cpu

        return shrink_for_cpu(text)
    return text


def inside(device: str) -> None:
    problem, candidate = _source(PROBLEM, device), CANDIDATE.read_text()
    with tempfile.TemporaryDirectory(prefix="jitdiag-") as build_dir:
        for label, source in (("probe", candidate + "\nCLONE = False\n" + PROBE),
                              ("probe on a clone", candidate + "\nCLONE = True\n" + PROBE),
                              ("plain", candidate)):
            _evaluate(label, problem, source, "rmsnorm", device, build_dir)
        if device == "cuda":
            _evaluate("reduce-overhead probe", _source(GRAPH_PROBLEM, device),
                      GRAPH_CANDIDATE.read_text() + GRAPH_PROBE, "gemm_bias_silu", device,
                      build_dir)


def overhead(device: str) -> None:
    """conv_bn_fold_eval three times: per call, each side's wall time outside the timed
    calls, the wall-clock check's verdict and the threads that appeared."""
    problem = _source(CONV_PROBLEM, device)
    with tempfile.TemporaryDirectory(prefix="overhead-") as build_dir:
        for run in range(3):
            result = evaluate(_job(problem, CONV_CANDIDATE.read_text(), "conv_bn_relu_eval",
                                   device, build_dir))
            outside = " ".join(f"{side}={t.outside_ms:.4f}" for side, t in result.timing.items()
                               if t.outside_ms is not None)
            notes = "; ".join(f"{f.code}: {f.reason[:160]}" for f in result.flags
                              if f.code in ("timing_unaccounted", "native_threads"))
            print(f"conv_bn_fold_eval run {run + 1}: {result.status} speedup "
                  f"{result.speedup} outside ms/call {outside} {notes}", flush=True)


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
    overhead(args.device)
    cudagraph(args.device)
    plain(args.device)
    inside(args.device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
