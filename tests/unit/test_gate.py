"""The static gate: each rule on small sources, and no false positives on honest candidates."""

from __future__ import annotations

import textwrap

import pytest

from cudal1_tui.analysis.gate import Finding, check_candidate, rejected

PROBLEM = textwrap.dedent('''
    import torch
    import torch.nn as nn

    M = 128
    N = 64

    class Model(nn.Module):
        def __init__(self):
            super().__init__()

        def forward(self, A, B):
            return torch.relu(torch.matmul(A, B))

    def get_inputs():
        return [torch.randn(M, N), torch.randn(N, M)]

    def get_init_inputs():
        return []
''')

HEADER = "import torch\nimport torch.nn as nn\n"
MODEL_NEW = textwrap.dedent('''
    class ModelNew(nn.Module):
        def __init__(self):
            super().__init__()

        def forward(self, A, B):
            return torch.relu(A @ B)
''')


def gate(body: str, *, model_new: bool = True, problem: str = PROBLEM) -> list[Finding]:
    source = HEADER + textwrap.dedent(body) + (MODEL_NEW if model_new else "")
    return check_candidate(source, problem)


def codes(findings: list[Finding], severity: str = "reject") -> set[str]:
    return {f.code for f in findings if f.severity == severity}


# -- honest candidates: nothing rejected --------------------------------------------------------

HONEST = {
    "plain": "",
    "torch_compile": "fast = torch.compile(lambda a, b: torch.relu(a @ b), mode='max-autotune')\n",
    "cudnn_benchmark": "torch.backends.cudnn.benchmark = True\n",
    "triton": '''
        import triton
        import triton.language as tl

        @triton.jit
        def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
            pid = tl.program_id(0)
            offs = pid * BLOCK + tl.arange(0, BLOCK)
            mask = offs < n
            x = tl.load(x_ptr + offs, mask=mask)
            tl.store(out_ptr + offs, tl.maximum(x, 0.0), mask=mask)
    ''',
    "cuda_graph": '''
        class Graphed:
            def __init__(self, fn, example):
                self.static_in = example.clone()
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    fn(self.static_in)
                torch.cuda.current_stream().wait_stream(s)
                self.graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(self.graph):
                    self.static_out = fn(self.static_in)
                self.graphs = {}

            def __call__(self, x):
                if x.shape not in self.graphs:
                    self.graphs[x.shape] = self.graph
                self.static_in.copy_(x)
                self.graph.replay()
                return self.static_out.clone()
    ''',
    "load_inline_cuda": '''
        from torch.utils.cpp_extension import load_inline

        cuda_src = """
        #include <torch/extension.h>
        #include <ATen/cuda/CUDAContext.h>
        __global__ void relu_k(const float* x, float* y, int n) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
        }
        torch::Tensor relu(torch::Tensor x) {
            auto y = torch::empty_like(x);
            int n = x.numel();
            cudaStream_t stream = at::cuda::getCurrentCUDAStream();
            const float* xp = x.data_ptr<float>();
            relu_k<<<(n + 255) / 256, 256, 0, stream>>>(xp, y.data_ptr<float>(), n);
            relu_k<<<(n + 255) / 256, 256>>>(xp, y.data_ptr<float>(), n);
            return y;
        }
        """
        cpp_src = "torch::Tensor relu(torch::Tensor x);"
        ext = load_inline(name="relu_ext", cpp_sources=cpp_src, cuda_sources=[cuda_src],
                          functions=["relu"], verbose=False)
    ''',
    "copied_inputs": '''
        M = 128
        N = 64

        def get_inputs():
            # same as the problem, on the GPU
            return [torch.randn(M, N).cuda(), torch.randn(N, M, device="cuda")]
    ''',
    "kernel_builder_cache": '''
        import functools

        @functools.lru_cache(maxsize=None)
        def build():
            return torch.compile(torch.relu)
    ''',
    "mentions_in_strings": '''
        NOTE = "we do not use threading, subprocess or gc.get_objects here"
        # torch.matmul = slow would be a hack; we do not do it
    ''',
    "env_read": "import os\nARCH = os.environ.get('TORCH_CUDA_ARCH_LIST', '')\n",
    "locals_named_like_modules": (
        "def f(signal, socket):\n"
        "    gc = signal.sum() + socket.mean()\n"
        "    time = gc * 2\n"
        "    time.real = 1\n"
        "    setattr(time, 'x', 1)\n"
        "    return gc.item(), signal.shape\n"
    ),
    "shape_index": '''
        def rows(x):
            table = {}
            table[x.shape[0]] = 1
            return x.shape[0] in (1, 2)
    ''',
}


@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_candidates_pass(name: str) -> None:
    findings = gate(HONEST[name])
    assert rejected(findings) == [], findings


def test_settings_and_env_are_warnings() -> None:
    assert "global_setting" in codes(gate(HONEST["cudnn_benchmark"]), "warn")
    assert "environment" in codes(gate(HONEST["env_read"]), "warn")


def test_cuda_graph_side_stream_is_reported_not_rejected() -> None:
    findings = gate(HONEST["cuda_graph"])
    assert "side_stream" in codes(findings, "warn")
    assert any("CUDA graph" in f.reason for f in findings)


def test_compile_modes_that_replay_cuda_graphs_warn_about_their_outputs() -> None:
    findings = gate(HONEST["torch_compile"])  # mode='max-autotune'
    assert "cuda_graph_outputs" in codes(findings, "warn")
    assert any("clone the result" in f.reason for f in findings)
    overhead = gate("fast = torch.compile(torch.relu, mode=\"reduce-overhead\")\n")
    assert "cuda_graph_outputs" in codes(overhead, "warn") and not rejected(overhead)
    plain = gate("fast = torch.compile(torch.relu)\nfull = torch.compile(torch.relu, "
                 "mode='max-autotune-no-cudagraphs')\n")
    assert "cuda_graph_outputs" not in codes(plain, "warn")
    cloned = gate("fast = torch.compile(torch.relu, mode='reduce-overhead')\n"
                  "def call(x):\n    return fast(x).clone()\n")
    assert "cuda_graph_outputs" not in codes(cloned, "warn")


# -- each rule ------------------------------------------------------------------------------------

REJECTED = {
    "stream": ("s = torch.cuda.Stream()\n", "side_stream"),
    "stream_ctx": ("def f(s):\n    with torch.cuda.stream(s):\n        pass\n", "side_stream"),
    "thread_alias": ("import threading as th\nth.Thread(target=print).start()\n", "threads"),
    "thread_from": ("from concurrent.futures import ThreadPoolExecutor\n", "threads"),
    "asyncio": ("import asyncio\n", "threads"),
    "fork": ("import os\nos.fork()\n", "threads"),
    "jit_fork": ("fut = torch.jit.fork(torch.relu, torch.ones(1))\n", "threads"),
    "patch_timer": ("import time\ntime.perf_counter = lambda: 0.0\n", "patching"),
    "patch_functional": ("import torch.nn.functional as F\nF.relu = abs\n", "patching"),
    "patch_tensor": ("torch.Tensor.__matmul__ = lambda a, b: a\n", "patching"),
    "patch_setattr": ("setattr(torch, 'matmul', lambda a, b: a)\n", "patching"),
    "patch_builtins": ("import builtins\nbuiltins.print = None\n", "patching"),
    "patch_module_forward": ("nn.Linear.forward = lambda self, x: x\n", "patching"),
    "subclass": ("class Lazy(torch.Tensor):\n    pass\n", "tensor_subclass"),
    "torch_function": ("class W:\n    def __torch_function__(self, *a):\n        pass\n",
                       "tensor_subclass"),
    "make_subclass": ("t = torch.Tensor._make_subclass(object, torch.ones(1))\n",
                      "tensor_subclass"),
    "gc": ("import gc\n", "introspection"),
    "inspect": ("import inspect\nf = inspect.currentframe()\n", "introspection"),
    "getframe_getattr": ("import sys\nf = getattr(sys, '_getframe')(1)\n", "introspection"),
    "sys_modules": ("import sys\nm = sys.modules['__main__']\n", "introspection"),
    "f_back": ("def f(frame):\n    return frame.f_back.f_locals\n", "introspection"),
    "globals_dunder": ("def f(g):\n    return g.__globals__\n", "introspection"),
    "ctypes": ("import ctypes\n", "introspection"),
    "importlib": ("import importlib\nm = importlib.import_module('gc')\n", "introspection"),
    "dunder_import": ("m = __import__('gc')\n", "introspection"),
    "exec": ("exec('import gc')\n", "dynamic_code"),
    "os_system": ("import os\nos.system('ls')\n", "process_or_network"),
    "subprocess": ("import subprocess\n", "process_or_network"),
    "socket": ("import socket\n", "process_or_network"),
    "urllib": ("from urllib.request import urlopen\n", "process_or_network"),
    "requests": ("import requests\n", "process_or_network"),
    "open_write": ("with open('/tmp/x', 'w') as fh:\n    fh.write('1')\n", "file_write"),
    "open_mode_kw": ("fh = open('/tmp/x', mode='ab')\n", "file_write"),
    "write_text": ("from pathlib import Path\nPath('/tmp/x').write_text('1')\n", "file_write"),
    "shutil": ("import shutil\n", "file_write"),
    "cache_ptr": ("_c = {}\ndef f(x):\n    return _c.get(x.data_ptr())\n", "result_cache"),
    "cache_id": ("_c = {}\ndef f(x):\n    if id(x) in _c:\n        return _c[id(x)]\n",
                 "result_cache"),
    "cache_shape_key": ("_c = {}\ndef f(x):\n    k = tuple(x.shape)\n    return _c[k]\n",
                        "result_cache"),
    "rng_state": ("s = torch.initial_seed()\n", "rng_state"),
    "harness": ("import cudal1_evaluator.common.compare as c\n", "harness_access"),
    "reference_module": ("from cudal1_reference_problem import get_inputs\n", "harness_access"),
    "default_dtype": ("torch.set_default_dtype(torch.float16)\n", "global_defaults"),
}


@pytest.mark.parametrize("name", sorted(REJECTED))
def test_rule_rejects(name: str) -> None:
    body, code = REJECTED[name]
    findings = gate(body)
    assert code in codes(findings), findings
    assert all(f.reason and f.line >= 1 for f in rejected(findings))


def test_lru_cache_on_forward_rejected() -> None:
    findings = gate('''
        import functools

        class ModelNew(nn.Module):
            @functools.lru_cache(maxsize=None)
            def forward(self, A, B):
                return torch.relu(A @ B)
    ''', model_new=False)
    assert "result_cache" in codes(findings)


def test_call_counter_warns() -> None:
    findings = gate('''
        class ModelNew(nn.Module):
            def forward(self, A, B):
                self.n += 1
                return torch.relu(A @ B)
    ''', model_new=False)
    assert "call_counter" in codes(findings, "warn")
    assert not rejected(findings)


def test_missing_modelnew_rejected_with_message() -> None:
    findings = gate("x = 1\n", model_new=False)
    [f] = [f for f in findings if f.code == "missing_modelnew"]
    assert f.severity == "reject" and "class ModelNew" in f.reason


@pytest.mark.parametrize("body", [
    "class ModelNew(Model):\n    pass\n",
    "class ModelNew(nn.Module):\n    def forward(self, A, B):\n        return Model()(A, B)\n",
    "class ModelNew(nn.Module):\n    def forward(self, A, B):\n"
    "        return Model.forward(self, A, B)\n",
])
def test_reference_model_use_rejected(body: str) -> None:
    assert "reference_fallback" in codes(gate("from problem import Model\n" + body,
                                              model_new=False))


@pytest.mark.parametrize("handler", [
    "return torch.relu(torch.matmul(A, B))",
    "return super().forward(A, B)",
])
def test_try_except_fallback_warned(handler: str) -> None:
    findings = gate(f'''
        class ModelNew(nn.Module):
            def forward(self, A, B):
                try:
                    return kernel(A, B)
                except Exception:
                    {handler}
    ''', model_new=False)
    assert "reference_fallback" in codes(findings, "warn")  # rejected when taken (profile)


def test_try_except_without_reference_op_passes() -> None:
    findings = gate('''
        try:
            import triton
        except ImportError:
            triton = None
    ''')
    assert not rejected(findings)


def test_changed_sizes_and_own_inputs() -> None:
    findings = gate('''
        M = 16
        N = 32 * 2

        def get_inputs():
            return [torch.randn(M, N), torch.randn(N, M)]

        def get_init_inputs():
            return [1]
    ''')
    reasons = {f.code: f.reason for f in rejected(findings)}
    assert "changed_sizes" in reasons and "16" in reasons["changed_sizes"]
    assert "own_inputs" in codes(findings, "info")  # never used by the evaluator
    assert not [f for f in findings if f.code == "changed_sizes" and "`N`" in f.reason]


@pytest.mark.parametrize("body", [
    "def f(x):\n    return x.half()\n",
    "y = torch.ones(2, dtype=torch.bfloat16)\n",
    "torch.backends.cuda.matmul.allow_tf32 = True\n",
    "torch.set_float32_matmul_precision('high')\n",
])
def test_precision_warns_on_fp32_problem(body: str) -> None:
    findings = gate(body)
    assert "precision" in codes(findings, "warn") and not rejected(findings)


def test_precision_silent_on_fp16_problem() -> None:
    problem = PROBLEM.replace("torch.randn(M, N)", "torch.randn(M, N).half()")
    assert "precision" not in codes(gate("def f(x):\n    return x.half()\n", problem=problem),
                                    "warn")


# -- C++/CUDA sources -----------------------------------------------------------------------------

def cuda_candidate(body: str) -> list[Finding]:
    return gate(f'''
        from torch.utils.cpp_extension import load_inline
        SRC = r"""
        #include <torch/extension.h>
        {textwrap.indent(textwrap.dedent(body), "        ").lstrip()}
        """
        ext = load_inline(name="x", cpp_sources="", cuda_sources=SRC, functions=["f"])
    ''')


@pytest.mark.parametrize(("body", "code"), [
    ("void f() { cudaStream_t s; cudaStreamCreate(&s); k<<<1, 32, 0, s>>>(); }", "side_stream"),
    ("void f() { auto s = at::cuda::getStreamFromPool(); k<<<1, 32, 0, s>>>(); }", "side_stream"),
    ("void f() { k<<<1, 32, 0, cudaStreamPerThread>>>(); }", "side_stream"),
    ("#include <thread>\nvoid f() { std::thread t(g); t.detach(); }", "threads"),
    ("void f() { pthread_t t; pthread_create(&t, 0, g, 0); }", "threads"),
    ("void f() { auto r = std::async(std::launch::async, g); }", "threads"),
    ("void f() { system(\"ls\"); }", "process_or_network"),
    ("void f() { FILE* fp = fopen(\"/tmp/o\", \"w\"); }", "file_write"),
])
def test_cuda_rules_reject(body: str, code: str) -> None:
    assert code in codes(cuda_candidate(body))


def test_cuda_unknown_stream_warns_and_lines_map_to_python() -> None:
    findings = cuda_candidate("void f(cudaStream_t s) {\n    k<<<1, 32, 0, s>>>();\n}")
    [f] = [f for f in findings if f.code == "side_stream"]
    assert f.severity == "warn"
    assert f.line == 8  # HEADER (2) + blank + import + SRC + include + signature + launch


def test_cuda_half_precision_warns() -> None:
    findings = cuda_candidate("#include <cuda_fp16.h>\n__global__ void k(__half* x) {}")
    assert "precision" in codes(findings, "warn") and not rejected(findings)


def test_cpp_source_found_through_concatenation_and_fstrings() -> None:
    findings = gate('''
        from torch.utils.cpp_extension import load_inline
        BLOCK = 256
        HEAD = "#include <torch/extension.h>\\n"
        BODY = f"""
        void f() {{ system("ls"); int b = {BLOCK}; }}
        """
        ext = load_inline(name="x", cpp_sources=[HEAD + BODY], functions=["f"])
    ''')
    assert "process_or_network" in codes(findings)


def test_finding_to_flag() -> None:
    flag = Finding("threads", "starts threads", "reject", 12).to_flag()
    assert flag.code == "static.threads" and flag.severity == "reject"
    assert flag.reason == "line 12: starts threads"


def test_syntax_error_is_only_a_warning() -> None:
    findings = check_candidate("import torch\nclass ModelNew(:\n    pass\n", PROBLEM)
    assert "syntax" in codes(findings, "warn")


# -- the gate-then-evaluate glue (no evaluation runs here) ---------------------------------------

def test_make_job_rejects_unknown_settings() -> None:
    from cudal1_tui.judging import make_job

    job = make_job(PROBLEM, "x", device="cuda", correctness_trials=2,
                   reward={"name": "binary", "params": {}})
    assert job.device == "cuda" and job.correctness_trials == 2 and job.reward.name == "binary"
    with pytest.raises(ValueError, match="unknown job setting"):
        make_job(PROBLEM, "x", trails=3)


def test_gate_result_rejects_with_flags_and_zero_reward() -> None:
    from cudal1_tui.judging import JUDGE, make_job

    bad = JUDGE.gate(make_job(PROBLEM, HEADER + "import gc\n" + MODEL_NEW)).verdict
    assert bad is not None and bad.status == "rejected" and bad.reward == 0.0
    assert bad.message.startswith("static gate: line 3:")
    assert [f.code for f in bad.flags] == ["static.introspection"]
    assert JUDGE.gate(make_job(PROBLEM, HEADER + MODEL_NEW)).verdict is None
