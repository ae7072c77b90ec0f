"""Find the C++/CUDA code a candidate compiles: the strings it hands to ``load_inline``.

Sources are followed through names (``cuda_sources=[kernel_src]`` with ``kernel_src = "..."``),
lists, ``+`` concatenation and f-strings; any other string literal that plainly holds C++ (an
``#include``, a ``__global__`` kernel, ``torch::Tensor``) is taken too, so that code assembled in
ways the gate does not follow is still read.
"""

from __future__ import annotations

from dataclasses import dataclass

from tree_sitter import Node

from cudal1_tui.analysis import source_tree as ts
from cudal1_tui.analysis.pymodule import PyModule, call_arguments

_SOURCE_KEYWORDS = ("cpp_sources", "cuda_sources")
_CPP_MARKERS = ("#include", "__global__", "torch::Tensor", "at::Tensor", "PYBIND11_MODULE",
                "<<<", "__device__")


@dataclass(frozen=True)
class CppSource:
    code: str
    line: int  # 1-based Python line where the string starts (C++ line 1 maps here)


def extract(mod: PyModule) -> list[CppSource]:
    nodes: dict[int, Node] = {}
    for call in _load_inline_calls(mod):
        positional, keywords = call_arguments(call)
        values = [keywords[k] for k in _SOURCE_KEYWORDS if k in keywords]
        values += positional[1:3]  # load_inline(name, cpp_sources, cuda_sources, ...)
        for value in values:
            for string in _strings(mod, value, depth=0):
                nodes[string.id] = string
    for node in ts.walk(mod.root):
        if node.type in ("string", "concatenated_string") and node.parent is not None \
                and node.parent.type != "concatenated_string":
            text = ts.string_value(node) or ""
            if any(marker in text for marker in _CPP_MARKERS):
                nodes[node.id] = node
    out = [CppSource(ts.string_value(n) or "", ts.line(n)) for n in nodes.values()]
    return sorted(out, key=lambda s: s.line)


def _load_inline_calls(mod: PyModule) -> list[Node]:
    calls = []
    for node in ts.walk(mod.root):
        func = node.child_by_field_name("function") if node.type == "call" else None
        name = mod.resolve(func) if func is not None else None
        if name is not None and name.split(".")[-1] == "load_inline":
            calls.append(node)
    return calls


def _strings(mod: PyModule, node: Node, depth: int) -> list[Node]:
    """String literal nodes an expression is built from (names followed a few levels deep)."""
    if depth > 4:
        return []
    if node.type in ("string", "concatenated_string"):
        return [node]
    if node.type in ("list", "tuple", "parenthesized_expression", "binary_operator"):
        out: list[Node] = []
        for child in node.named_children:
            out += _strings(mod, child, depth + 1)
        return out
    if node.type == "identifier":
        value = _binding(mod, ts.text(node))
        return _strings(mod, value, depth + 1) if value is not None else []
    return []


def _binding(mod: PyModule, name: str) -> Node | None:
    """The value last assigned to ``name`` anywhere in the module (module level first)."""
    value = mod.assignments().get(name)
    if value is not None:
        return value
    found = None
    for match in ts.matches("python", "(assignment left: (identifier) @n right: (_) @v)", mod.root):
        if ts.text(match["n"][0]) == name:
            found = match["v"][0]
    return found
