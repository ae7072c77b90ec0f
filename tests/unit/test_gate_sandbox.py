"""The gate's rules for process state and aliases (``rules_sandbox``), and their honest shapes."""

from __future__ import annotations

import textwrap

import pytest

from cudal1_tui.analysis.gate import Finding, check_candidate

PROBLEM = textwrap.dedent('''
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def forward(self, A, B):
            return torch.relu(torch.matmul(A, B))

    def get_inputs():
        return [torch.randn(8, 8), torch.randn(8, 8)]

    def get_init_inputs():
        return []
''')
MODEL_NEW = textwrap.dedent('''
    class ModelNew(nn.Module):
        def forward(self, A, B):
            return torch.relu(A @ B)
''')


def gate(body: str) -> list[Finding]:
    source = "import torch\nimport torch.nn as nn\n" + textwrap.dedent(body) + MODEL_NEW
    return check_candidate(source, PROBLEM)


def codes(findings: list[Finding], severity: str = "reject") -> set[str]:
    return {f.code for f in findings if f.severity == severity}


def cpp(body: str, extra: str = "") -> list[Finding]:
    return gate(f'''
        from torch.utils.cpp_extension import load_inline
        SRC = r"""
        #include <torch/extension.h>
        {textwrap.indent(textwrap.dedent(body), "        ").lstrip()}
        """
        ext = load_inline(name="x", cpp_sources=SRC, functions=["f"])
        {extra}
    ''')


@pytest.mark.parametrize(("body", "code"), [
    ('lib = torch.library.Library("aten", "IMPL")\n', "dispatcher_override"),
    ('from torch.library import Library\nlib = Library("aten", "IMPL")\n', "dispatcher_override"),
    ('torch.library.impl("aten::mm", "CPU")\n', "dispatcher_override"),
    ('ns = "aten"\nlib = torch.library.Library(ns, "IMPL")\n', "dispatcher_override"),
    ("from torch.nn.modules.module import register_module_forward_hook\n"
     "register_module_forward_hook(lambda m, i, o: o)\n", "global_hook"),
    ("torch.nn.modules.module.register_module_forward_pre_hook(print)\n", "global_hook"),
    ("nn.modules.module.register_module_full_backward_hook(print)\n", "global_hook"),
    ("import signal\nsignal.signal(signal.SIGALRM, print)\n", "signals"),
    ("import signal\nsignal.setitimer(signal.ITIMER_REAL, 0.001)\n", "signals"),
    ("import signal\nsignal.alarm(1)\n", "signals"),
    ("import os\nos.sched_setaffinity(0, {0})\n", "scheduling"),
    ("import os\nos.nice(5)\n", "scheduling"),
    ("import os\nos.setpriority(os.PRIO_PROCESS, 0, 5)\n", "scheduling"),
    ('torch.set_autocast_enabled("cpu", True)\n', "autocast"),
    ('torch.autocast("cpu").__enter__()\n', "autocast"),
    ("ctx = torch.autocast('cuda')\nctx.__enter__()\n", "autocast"),
    ('import os\nm = os.sys.modules["cudal1_evaluator.common.compare"]\n', "introspection"),
    ("import os\nf = os.sys._getframe(0)\n", "introspection"),
    ("import builtins\nopen_ = builtins.open\n", "introspection"),
    ('import os\nname = "sys"\nmod = getattr(os, name)\n', "introspection"),
    ('import importlib\nm = importlib.import_module("gc")\n', "introspection"),
    ('m = __import__("gc")\n', "introspection"),
])
def test_python_rule_rejects(body: str, code: str) -> None:
    assert code in codes(gate(body))


@pytest.mark.parametrize(("body", "code"), [
    ("TORCH_LIBRARY_IMPL(aten, CPU, m) { m.impl(\"tanh\", &f); }", "dispatcher_override"),
    ("TORCH_LIBRARY_FRAGMENT(aten, m) { m.def(\"x() -> ()\"); }", "dispatcher_override"),
    ("void f() { c10::Dispatcher::singleton(); }", "dispatcher_override"),
    ("void f() { signal(SIGALRM, h); }", "signals"),
    ("void f() { struct itimerval t; setitimer(ITIMER_REAL, &t, 0); }", "signals"),
    ("void f() { cpu_set_t s; sched_setaffinity(0, sizeof(s), &s); }", "scheduling"),
])
def test_cpp_rule_rejects(body: str, code: str) -> None:
    assert code in codes(cpp(body))


def test_native_write_naming_the_interpreter_is_rejected() -> None:
    body = "int f(std::string p) { int fd = ::open(p.c_str(), O_WRONLY | O_CREAT, 0644); " \
           "return fd; }"
    found = cpp(body, 'ext.f(os.path.join(site.getsitepackages()[0], "x.pth"))')
    assert "native_file_write" in codes(found)


@pytest.mark.parametrize("body", [
    # the candidate's own op namespace: reported, not rejected
    '@torch.library.custom_op("mylib::fused", mutates_args=())\n'
    "def fused(x: torch.Tensor) -> torch.Tensor:\n    return x.clone()\n",
    'lib = torch.library.Library("mylib", "DEF")\n',
    # autocast as a context manager inside forward
    "def helper(x):\n    with torch.autocast('cuda', dtype=torch.float16):\n        return x @ x\n",
    # getattr on plain modules with literal or computed names of harmless things
    'act = getattr(nn, "ReLU")()\n',
    "def build(name):\n    return getattr(nn, name)()\n",
    'dtype = getattr(torch, "float16")\n',
])
def test_honest_shapes_are_not_rejected(body: str) -> None:
    found = gate(body)
    assert codes(found) == set(), [f.reason for f in found]


def test_own_cpp_op_namespace_is_only_reported() -> None:
    found = cpp("TORCH_LIBRARY(myops, m) { m.def(\"f(Tensor x) -> Tensor\"); }")
    assert "custom_op" in codes(found, "warn")
    assert "dispatcher_override" not in codes(found)


def test_cpp_file_io_without_interpreter_paths_is_not_native_file_write() -> None:
    found = cpp("void f() { int fd = ::open(\"/dev/null\", 0); }")
    assert "native_file_write" not in codes(found)
