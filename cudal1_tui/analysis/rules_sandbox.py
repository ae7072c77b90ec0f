"""Gate rules for process state a candidate can change without patching a Python object.

Dispatcher overrides (``torch.library`` on torch's own namespaces, ``TORCH_LIBRARY_IMPL(aten,
...)`` in C++), global module hooks, signal handlers and timers, CPU affinity and priority,
autocast switched on for the whole thread, aliases that reach forbidden modules (``os.sys``,
``getattr(module, name)``, ``import builtins``), and native file writes aimed at the
interpreter (``.pth``, site-packages). The evaluator's snapshots and OS sandbox stop these at run
time too; the gate says so before anything runs. Honest shapes stay accepted: a candidate's own
op namespace (``torch.library.custom_op("mylib::fused", ...)``) is only reported, ``with
torch.autocast(...)`` inside ``forward`` is fine, ``getattr(nn, "ReLU")`` is plain Python.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from tree_sitter import Node

from cudal1_tui.analysis import rules_names as rn
from cudal1_tui.analysis import source_tree as ts
from cudal1_tui.analysis.cpp_sources import CppSource
from cudal1_tui.analysis.findings import Finding
from cudal1_tui.analysis.pymodule import PyModule, call_arguments
from cudal1_tui.analysis.rules_python import references

_TORCH_NAMESPACES = frozenset({"aten", "prims", "quantized", "_quantized", "quantized_decomposed",
                               "_c10d_functional", "c10d", "profiler", "inductor", "torchvision"})
_LIBRARY_CALLS = frozenset({"torch.library.Library", "torch.library.impl",
                            "torch.library.custom_op", "torch.library.register_kernel",
                            "torch.library.define", "torch.library._scoped_library",
                            "torch.library.register_fake", "torch.library.register_autograd",
                            "torch.library.register_torch_dispatch",
                            "torch.library.fallthrough_kernel"})
_HOOKS = ("torch.nn.modules.module.register_module_", "torch.nn.modules.register_module_",
          "torch.nn.register_module_")
_RULES: tuple[rn.NameRule, ...] = (
    rn.NameRule(("signal.signal", "signal.setitimer", "signal.alarm", "signal.pthread_kill",
                 "signal.raise_signal", "signal.siginterrupt", "signal.set_wakeup_fd"),
                "signals", "reject", "installs signal handlers or timers: they interrupt the "
                "harness and the reference at moments the candidate chooses"),
    rn.NameRule(("os.sched_setaffinity", "os.nice", "os.setpriority", "os.sched_setscheduler",
                 "os.sched_setparam", "psutil"), "scheduling", "reject",
                "changes the process's CPU affinity or priority: the reference runs slower"),
    rn.NameRule(("torch.set_autocast_enabled", "torch.set_autocast_dtype",
                 "torch.set_autocast_gpu_dtype", "torch.set_autocast_cpu_enabled",
                 "torch.set_autocast_cpu_dtype", "torch._C._set_autocast*",
                 "torch.set_autocast_*"), "autocast", "reject",
                "switches autocast on for the whole thread: the reference would run in lower "
                "precision"),
    rn.NameRule(("os.sys", "os.builtins", "torch.sys", "torch.os.sys"), "introspection",
                "reject", "reaches `sys` through another module's attribute (an alias the "
                "gate would otherwise miss)"),
)
_DANGEROUS_MODULES = frozenset({"os", "sys", "gc", "builtins", "importlib", "ctypes", "inspect",
                                "torch._C", "signal", "threading", "subprocess"})
_CPP_LIBRARY = re.compile(r"\b(TORCH_LIBRARY(?:_IMPL|_FRAGMENT)?)\s*\(\s*(\w+)")
_CPP_DISPATCH = re.compile(r"\b(c10::Dispatcher|RegisterOperators|registerKernel|"
                           r"torch::RegisterOperators)\b")
_CPP_STATE = re.compile(r"\b(sigaction|signal|setitimer|alarm|sched_setaffinity|"
                        r"pthread_setaffinity_np|setpriority|nice)\s*\(")
_CPP_OPEN = re.compile(r"(?<![\w.>])(?:::)?(open|openat|creat|fopen|freopen)\s*\(|\bofstream\b")
_INTERPRETER_PATHS = re.compile(r"\.pth\b|site-packages|dist-packages|sitecustomize|"
                                r"usercustomize|/usr/lib/python|\.pyenv|/cudal1_evaluator/|/evaluator/")


def check(mod: PyModule, sources: list[CppSource]) -> list[Finding]:
    return [*_python_names(mod), *_library_calls(mod), *_aliases(mod), *_autocast_enter(mod),
            *_cpp(mod, sources)]


def _python_names(mod: PyModule) -> Iterator[Finding]:
    for name, node in references(mod):
        if name.startswith(_HOOKS):
            yield Finding("global_hook", f"`{name}`: a global module hook runs on every module, "
                          "the reference included, and can rewrite its output", "reject",
                          ts.line(node))
        for rule in _RULES:
            if rule.matches(name):
                yield Finding(rule.code, f"`{name}`: {rule.reason}", rule.severity,
                              ts.line(node))
        if name.startswith(("os.sys.", "torch.sys.")):
            inner = name.split(".", 1)[1]
            for rule in rn.NAME_RULES:
                if rule.matches(inner):
                    yield Finding(rule.code, f"`{name}`: {rule.reason}", rule.severity,
                                  ts.line(node))


def _calls(mod: PyModule) -> Iterator[tuple[Node, str, list[Node]]]:
    for node in ts.walk(mod.root):
        if node.type == "call":
            func = node.child_by_field_name("function")
            name = (mod.resolve(func) or "") if func is not None else ""
            yield node, name, call_arguments(node)[0]


def _library_calls(mod: PyModule) -> Iterator[Finding]:
    for node, name, args in _calls(mod):
        if name not in _LIBRARY_CALLS and not name.startswith("torch.library.Library."):
            continue
        first = ts.string_value(args[0]) if args else None
        namespace = (first or "").split("::")[0]
        if first is not None and namespace not in _TORCH_NAMESPACES:
            yield Finding("custom_op", f"`{name}` registers the candidate's own op "
                          f"({first!r}): reported", "warn", ts.line(node))
            continue
        what = f"torch's own `{namespace}` ops" if first is not None else "an op named at run time"
        yield Finding("dispatcher_override", f"`{name}` registers kernels for {what}: it changes "
                      "what the harness and the reference compute", "reject", ts.line(node))


def _aliases(mod: PyModule) -> Iterator[Finding]:
    for imp in mod.imports:
        if imp.module == "builtins":
            yield Finding("introspection", "imports `builtins`: every builtin (and `__import__`) "
                          "by name, hidden from the gate", "reject", imp.line)
    for node, name, args in _calls(mod):
        if name != "builtins.getattr" or len(args) < 2 or ts.string_value(args[1]) is not None:
            continue
        base = mod.resolve_imported(args[0])
        if base in _DANGEROUS_MODULES:
            yield Finding("introspection", f"`getattr({base}, <computed name>)`: reaches "
                          "attributes of a sensitive module by a name the gate cannot read",
                          "reject", ts.line(node))


def _autocast_enter(mod: PyModule) -> Iterator[Finding]:
    for node in ts.walk(mod.root):
        if node.type != "call":
            continue
        func = node.child_by_field_name("function")
        if func is None or func.type != "attribute" or \
                ts.text(func.child_by_field_name("attribute")) != "__enter__":
            continue
        target = ts.text(func.child_by_field_name("object"))
        if "autocast" in target or ts.enclosing(node, "function_definition") is None:
            yield Finding("autocast", "calls `__enter__()` by hand on a context manager "
                          f"(`{target[:60]}`): it stays active for the whole thread",
                          "reject", ts.line(node))


def _cpp(mod: PyModule, sources: list[CppSource]) -> Iterator[Finding]:
    for src in sources:
        for number, text in enumerate(src.code.splitlines()):
            line = src.line + number
            yield from _cpp_line(text, line)
        if _CPP_OPEN.search(src.code) and _INTERPRETER_PATHS.search(mod.source):
            yield Finding("native_file_write", "extension code opens files and the candidate "
                          "names the interpreter's files (.pth, site-packages): a planted .pth "
                          "runs in every later Python process", "reject", src.line)


def _cpp_line(text: str, line: int) -> Iterator[Finding]:
    code = text.split("//")[0]
    for macro, namespace in _CPP_LIBRARY.findall(code):
        if namespace in _TORCH_NAMESPACES:
            yield Finding("dispatcher_override", f"`{macro}({namespace}, ...)` registers "
                          f"kernels for torch's own ops: it changes what the harness and the "
                          "reference compute", "reject", line)
        else:
            yield Finding("custom_op", f"`{macro}({namespace}, ...)` registers the "
                          "candidate's own ops: reported", "warn", line)
    if _CPP_DISPATCH.search(code):
        yield Finding("dispatcher_override", "extension code talks to the dispatcher directly",
                      "reject", line)
    match = _CPP_STATE.search(code)
    if match:
        yield Finding("signals" if "sig" in match.group(1) or match.group(1) in
                      ("alarm", "setitimer") else "scheduling",
                      f"`{match.group(1)}` in extension code changes signal handling or "
                      "scheduling for the whole process", "reject", line)
