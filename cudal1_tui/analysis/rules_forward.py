"""Gate rules on what forward does with its data: result caches, call counters, input
mutation, unwritten outputs, outputs in CUDA-graph memory."""

from __future__ import annotations

from collections.abc import Iterator

from tree_sitter import Node

from cudal1_tui.analysis import source_tree as ts
from cudal1_tui.analysis.findings import Finding
from cudal1_tui.analysis.pymodule import PyModule, call_arguments

_CACHE_DECORATORS = ("functools.lru_cache", "functools.cache", "functools.cached_property")
SHAPE_KEY = "input shapes"
_NAMED_VALUE = "(assignment left: (identifier) @n right: (_) @v)"
_EMPTY = ("torch.empty", "torch.empty_like", "torch.empty_strided")


# torch.compile modes that replay CUDA graphs (CUDA graph trees) on a GPU
_GRAPH_MODES = ("reduce-overhead", "max-autotune")


def check(mod: PyModule) -> list[Finding]:
    return [*_caches(mod), *_counters(mod), *_forward_bodies(mod), *_graph_compiles(mod)]


def _graph_compiles(mod: PyModule) -> Iterator[Finding]:
    """``torch.compile(mode="reduce-overhead")``: the replays' outputs live in the graph's memory
    and the next call overwrites them. The worker may not see it (graph trees re-record or step
    aside there), so the user hears it from the source, unless it clones results anywhere."""
    if _clones(mod):
        return
    for node in ts.walk(mod.root):
        if node.type != "call":
            continue
        func = node.child_by_field_name("function")
        if func is None or mod.resolve(func) != "torch.compile":
            continue
        _, kwargs = call_arguments(node)
        mode = kwargs.get("mode")
        if mode is not None and ts.string_value(mode) in _GRAPH_MODES:
            yield Finding("cuda_graph_outputs", f"torch.compile(mode={ts.text(mode)}) replays CUDA "
                          "graphs whose outputs the next call overwrites: a caller holding two "
                          "results gets an error; clone the result before returning it",
                          "warn", ts.line(node))


def _clones(mod: PyModule) -> bool:
    for node in ts.walk(mod.root):
        func = node.child_by_field_name("function") if node.type == "call" else None
        if func is not None and (mod.resolve(func) == "torch.clone" or (
                func.type == "attribute" and ts.text(func.child_by_field_name("attribute"))
                == "clone")):
            return True
    return False


def _caches(mod: PyModule) -> Iterator[Finding]:
    yield from _cache_decorators(mod)
    for node in ts.walk(mod.root):
        key = _lookup_key(node)
        if key is None:
            continue
        kind = _key_kind(mod, key) or _key_kind_via_name(mod, key)
        if kind is not None:
            yield Finding("result_cache", f"looks up a cache keyed on {kind}: results reused "
                          "across calls are not computed", "reject", ts.line(node))


def _cache_decorators(mod: PyModule) -> Iterator[Finding]:
    for node in ts.walk(mod.root):
        if node.type != "decorated_definition":
            continue
        definition = node.child_by_field_name("definition")
        if definition is None or definition.type != "function_definition":
            continue
        for deco in (c for c in node.named_children if c.type == "decorator"):
            expr = deco.named_children[0] if deco.named_children else None
            if expr is not None and expr.type == "call":
                expr = expr.child_by_field_name("function")
            name = mod.resolve(expr) if expr is not None else None
            if name not in _CACHE_DECORATORS:
                continue
            fname = ts.text(definition.child_by_field_name("name"))
            params = definition.child_by_field_name("parameters")
            has_params = params is not None and len(params.named_children) > 0
            if fname in ("forward", "__call__"):
                yield Finding("result_cache", f"`@{name}` on {fname}: results are cached, not "
                              "computed", "reject", ts.line(deco))
            elif has_params:
                yield Finding("result_cache", f"`@{name}` on `{fname}`: fine for building "
                              "kernels, not for outputs", "warn", ts.line(deco))


def _lookup_key(node: Node) -> Node | None:
    """The key expression of ``d[k]``, ``d.get(k)``/``setdefault``/``pop``, or ``k in d``."""
    if node.type == "subscript":
        return node.child_by_field_name("subscript")
    if node.type == "call":
        func = node.child_by_field_name("function")
        if func is not None and func.type == "attribute" and \
                ts.text(func.child_by_field_name("attribute")) in ("get", "setdefault", "pop"):
            args, _ = call_arguments(node)
            return args[0] if args else None
    if node.type == "comparison_operator" and any(
            ts.text(op) in ("in", "not in") for op in node.children_by_field_name("operators")):
        container = node.named_children[-1] if node.named_children else None
        if container is not None and container.type in ("identifier", "attribute"):
            return node.named_children[0]
    return None


def _key_kind(mod: PyModule, key: Node) -> str | None:
    for sub in ts.walk(key):
        if sub.type == "call":
            func = sub.child_by_field_name("function")
            name = mod.resolve(func) if func is not None else None
            attr = ts.text(func.child_by_field_name("attribute")) \
                if func is not None and func.type == "attribute" else ""
            if attr == "data_ptr" or name in ("builtins.id", "builtins.hash"):
                return "a tensor's address or identity (data_ptr/id)"
    if _is_shape(key) or (key.type == "tuple" and any(_is_shape(c) for c in key.named_children)):
        return SHAPE_KEY
    return None


def _key_kind_via_name(mod: PyModule, key: Node) -> str | None:
    """``key = (A.data_ptr(), ...)`` then ``cache[key]``: follow the name inside its function."""
    if key.type != "identifier":
        return None
    scope = ts.enclosing(key, "function_definition") or mod.root
    for match in ts.matches("python", _NAMED_VALUE, scope):
        if ts.text(match["n"][0]) == ts.text(key):
            kind = _key_kind(mod, match["v"][0])
            if kind is not None:
                return kind
    return None


def _is_shape(node: Node) -> bool:
    """``x.shape``, ``x.size()``, ``tuple(x.shape)`` (not ``x.shape[0]``)."""
    if node.type == "attribute":
        return ts.text(node.child_by_field_name("attribute")) == "shape"
    if node.type == "call":
        func = node.child_by_field_name("function")
        if func is not None and func.type == "attribute":
            return ts.text(func.child_by_field_name("attribute")) == "size" and \
                not node.child_by_field_name("arguments").named_children  # type: ignore[union-attr]
        if func is not None and ts.text(func) == "tuple":
            args, _ = call_arguments(node)
            return len(args) == 1 and _is_shape(args[0])
    return False


def _counters(mod: PyModule) -> Iterator[Finding]:
    """``self.n += 1`` (or a global) inside forward: behaviour that changes with the call count."""
    for node in ts.walk(mod.root):
        if node.type != "function_definition" or ts.text(node.child_by_field_name("name")) \
                not in ("forward", "__call__"):
            continue
        for sub in ts.walk(node):
            if sub.type != "augmented_assignment":
                continue
            left = sub.child_by_field_name("left")
            if left is not None and left.type in ("attribute", "identifier") and \
                    _is_state(left, node):
                yield Finding("call_counter", f"`{ts.text(left)}` changes on every call: output "
                              "may depend on the call count", "warn", ts.line(sub))


def _is_state(target: Node, func: Node) -> bool:
    if target.type == "attribute":
        return True
    name = ts.text(target)
    return any(sub.type == "global_statement" and name in ts.text(sub) for sub in ts.walk(func))


def _forwards(mod: PyModule) -> Iterator[Node]:
    for node in ts.walk(mod.root):
        if node.type == "function_definition" and \
                ts.text(node.child_by_field_name("name")) == "forward":
            yield node


def _forward_bodies(mod: PyModule) -> Iterator[Finding]:
    for func in _forwards(mod):
        params = _param_names(func) - {"self"}
        for node in ts.walk(func):
            if node.type == "return_statement" and node.named_children:
                value = node.named_children[0]
                fn = value.child_by_field_name("function") if value.type == "call" else None
                if fn is not None and mod.resolve(fn) in _EMPTY:
                    yield Finding("uninitialised_output", "forward returns freshly allocated, "
                                  "unwritten memory (torch.empty): it can alias a stale result",
                                  "reject", ts.line(node))
            elif node.type == "call":
                fn = node.child_by_field_name("function")
                if fn is None or fn.type != "attribute":
                    continue
                method = ts.text(fn.child_by_field_name("attribute"))
                obj = ts.text(fn.child_by_field_name("object"))
                if obj in params and method.endswith("_") and not method.endswith("__"):
                    yield Finding("input_mutation", f"`{obj}.{method}(...)` modifies an input in "
                                  "place (the evaluator compares inputs after the call)", "warn",
                                  ts.line(node))


def _param_names(func: Node) -> set[str]:
    params = func.child_by_field_name("parameters")
    names = set()
    for p in params.named_children if params is not None else []:
        ident = p if p.type == "identifier" else next(
            (c for c in p.named_children if c.type == "identifier"), None)
        if ident is not None:
            names.add(ts.text(ident))
    return names
