"""Gate rules on the C++/CUDA sources a candidate compiles (parsed with tree-sitter-cuda)."""

from __future__ import annotations

from collections.abc import Iterator

from tree_sitter import Node

from cudal1_tui.analysis import source_tree as ts
from cudal1_tui.analysis.cpp_sources import CppSource
from cudal1_tui.analysis.findings import Finding

_STREAM_CREATE = frozenset({"cudaStreamCreate", "cudaStreamCreateWithFlags",
                            "cudaStreamCreateWithPriority", "getStreamFromPool",
                            "setCurrentCUDAStream", "getStreamFromExternal"})
_CURRENT_STREAM = ("getCurrentCUDAStream", "getDefaultCUDAStream", "current_stream")
_DEFAULT_STREAM_ARGS = frozenset({"0", "nullptr", "NULL", "cudaStreamLegacy", "(cudaStream_t)0",
                                  "cudaStream_t(0)", "0x0"})
_THREAD_CALLS = frozenset({"pthread_create", "async", "fork", "vfork", "clone"})
_THREAD_TYPES = frozenset({"std::thread", "std::jthread", "thread", "jthread", "pthread_t",
                           "std::future", "std::packaged_task"})
_PROCESS_CALLS = frozenset({"system", "popen", "execv", "execve", "execvp", "execl", "execlp",
                            "execle", "posix_spawn", "socket", "connect", "dlopen", "dlsym",
                            "kill"})
_FILE_TYPES = frozenset({"std::ofstream", "ofstream", "std::fstream", "fstream"})
_INCLUDES = {"thread": "threads", "pthread.h": "threads", "future": "threads",
             "sys/socket.h": "process_or_network", "dlfcn.h": "process_or_network",
             "spawn.h": "process_or_network"}
_LOW_PRECISION = frozenset({"__half", "half2", "__half2", "__nv_bfloat16", "__nv_bfloat162",
                            "__float2half", "__float2half_rn", "__half2float", "__float2bfloat16",
                            "__hmul", "__hadd", "__hfma", "__hmul2", "__hadd2", "__hfma2"})
_LOW_PRECISION_QUALIFIED = frozenset({"Half", "BFloat16", "kHalf", "kBFloat16", "kFloat16",
                                      "wmma", "__half"})
_LOW_PRECISION_INCLUDES = frozenset({"cuda_fp16.h", "cuda_bf16.h", "mma.h"})
_REASONS = {
    "threads": "starts host threads or async work in extension code: output can be produced "
               "after the timer stops",
    "process_or_network": "starts processes, loads libraries or opens sockets from extension code",
}


def check(sources: list[CppSource], fp32_problem: bool) -> list[Finding]:
    findings: list[Finding] = []
    for src in sources:
        root = ts.parse_cuda(src.code).root_node
        offset = src.line - 1
        found = [*_includes(root), *_calls(root), *_types(root), *_launches(root)]
        if fp32_problem:
            found += _precision(root)
        findings += [Finding(f.code, f.reason, f.severity, f.line + offset) for f in found]
    return findings


def _short(name: str) -> str:
    return name.replace(" ", "").split("::")[-1]


def _includes(root: Node) -> Iterator[Finding]:
    for node in ts.walk(root):
        if node.type != "preproc_include":
            continue
        path = ts.text(node.child_by_field_name("path")).strip('<>"')
        code = _INCLUDES.get(path)
        if code is not None:
            yield Finding(code, f"includes <{path}>: {_REASONS[code]}", "reject", ts.line(node))


def _calls(root: Node) -> Iterator[Finding]:
    for node in ts.walk(root):
        if node.type != "call_expression":
            continue
        func = node.child_by_field_name("function")
        name = ts.text(func).replace(" ", "")
        short = _short(name)
        line = ts.line(node)
        if short in _STREAM_CREATE:
            yield Finding("side_stream", f"`{name}` makes or switches to another CUDA stream: work "
                          "there can escape the timing", "reject", line)
        elif short in _THREAD_CALLS and (short != "async" or name.startswith("std::")):
            yield Finding("threads", f"`{name}`: {_REASONS['threads']}", "reject", line)
        elif short in _PROCESS_CALLS and name in (short, f"::{short}", f"std::{short}"):
            yield Finding("process_or_network", f"`{name}`: {_REASONS['process_or_network']}",
                          "reject", line)
        elif short == "fopen" and _fopen_writes(node):
            yield Finding("file_write", "`fopen` for writing in extension code", "reject", line)


def _fopen_writes(call: Node) -> bool:
    args = call.child_by_field_name("arguments")
    named = args.named_children if args is not None else []
    if len(named) < 2:
        return False
    mode = ts.text(named[1])
    return any(c in mode for c in "wa+")


def _types(root: Node) -> Iterator[Finding]:
    for node in ts.walk(root):
        if node.type not in ("declaration", "field_declaration", "parameter_declaration"):
            continue
        type_name = ts.text(node.child_by_field_name("type")).replace(" ", "")
        base = type_name.split("<")[0]
        if base in _THREAD_TYPES:
            yield Finding("threads", f"`{base}`: {_REASONS['threads']}", "reject", ts.line(node))
        elif base in _FILE_TYPES:
            yield Finding("file_write", f"`{base}` writes files from extension code", "reject",
                          ts.line(node))
        elif _short(base) in ("CUDAStreamGuard", "OptionalCUDAStreamGuard", "CUDAMultiStreamGuard"):
            yield Finding("side_stream", f"`{base}` switches the current stream", "warn",
                          ts.line(node))


def _launches(root: Node) -> Iterator[Finding]:
    """``kernel<<<grid, block, smem, stream>>>`` must launch on the current (or default) stream."""
    for node in ts.walk(root):
        if node.type != "kernel_call_syntax":
            continue
        args = node.named_children
        if len(args) < 4:
            continue
        stream = args[3]
        verdict = _stream_origin(root, stream)
        if verdict == "current":
            continue
        line = ts.line(node)
        if verdict == "created":
            yield Finding("side_stream", f"kernel launched on stream `{ts.text(stream)}`, which "
                          "is not the current stream: its work can escape the timing", "reject",
                          line)
        else:
            yield Finding("side_stream", f"kernel launched on stream `{ts.text(stream)}`, whose "
                          "origin the gate cannot tell (use at::cuda::getCurrentCUDAStream())",
                          "warn", line)


def _stream_origin(root: Node, stream: Node) -> str:
    """``current``, ``created`` (a new or pooled stream) or ``unknown``."""
    text = ts.text(stream).replace(" ", "")
    if text in _DEFAULT_STREAM_ARGS or any(c in text for c in _CURRENT_STREAM):
        return "current"
    if "cudaStreamPerThread" in text or any(c in text for c in _STREAM_CREATE):
        return "created"
    if stream.type != "identifier":
        return "unknown"
    origins = _bindings(root, text)
    if any(any(c in o for c in _STREAM_CREATE) for o in origins):
        return "created"
    if origins and all(any(c in o for c in _CURRENT_STREAM) for o in origins):
        return "current"
    return "unknown"


def _bindings(root: Node, name: str) -> list[str]:
    """Texts that give ``name`` a value: initialisers, assignments, ``cudaStreamCreate(&name)``."""
    out = []
    for node in ts.walk(root):
        if node.type == "init_declarator" and \
                ts.text(node.child_by_field_name("declarator")) == name:
            out.append(ts.text(node.child_by_field_name("value")))
        elif node.type == "assignment_expression" and \
                ts.text(node.child_by_field_name("left")) == name:
            out.append(ts.text(node.child_by_field_name("right")))
        elif node.type == "call_expression" and f"&{name}" in \
                ts.text(node.child_by_field_name("arguments")).replace(" ", ""):
            out.append(ts.text(node))
    return out


def _precision(root: Node) -> Iterator[Finding]:
    for node in ts.walk(root):
        what = _low_precision_name(node)
        if what is not None:
            yield _low_precision(what, ts.line(node))


def _low_precision_name(node: Node) -> str | None:
    name = ts.text(node)
    if node.type == "preproc_include":
        path = ts.text(node.child_by_field_name("path")).strip('<>"')
        return f"<{path}>" if path in _LOW_PRECISION_INCLUDES else None
    in_qualified = node.parent is not None and node.parent.type == "qualified_identifier"
    if node.type == "qualified_identifier" and not in_qualified:
        parts = set(name.replace(" ", "").split("::"))
        return name if parts & _LOW_PRECISION_QUALIFIED else None
    if node.type in ("identifier", "type_identifier") and not in_qualified:
        hit = name in _LOW_PRECISION or (node.type == "type_identifier" and name == "half")
        return name if hit else None
    return None


def _low_precision(what: str, line: int) -> Finding:
    return Finding("precision", f"`{what}`: half/bfloat16 math on an fp32 problem (the runtime "
                   "tolerance decides whether the damage is acceptable)", "warn", line)
