"""Gate rules on the candidate's Python code alone (no knowledge of the problem needed)."""

from __future__ import annotations

from collections.abc import Iterator

from tree_sitter import Node

from cudal1_tui.analysis import rules_forward, temp_paths
from cudal1_tui.analysis import rules_names as rn
from cudal1_tui.analysis import source_tree as ts
from cudal1_tui.analysis.findings import Finding
from cudal1_tui.analysis.pymodule import PyModule, call_arguments

_WRITE_MODES = frozenset("wax+")
_TEMP_WRITE = ("writes into a temp dir of its own (fine: each evaluation has a private temp dir "
               "and writes elsewhere are refused)")


def check(mod: PyModule) -> list[Finding]:
    findings: list[Finding] = []
    findings += _imports(mod)
    findings += _names(mod)
    findings += _attributes(mod)
    findings += _assignments(mod)
    findings += _calls(mod)
    findings += _classes(mod)
    findings += rules_forward.check(mod)
    if uses_cuda_graphs(mod):
        findings = [_next_to_graphs(f) for f in findings]
    return findings


def uses_cuda_graphs(mod: PyModule) -> bool:
    return any(any(rn.matches(p, name) for p in rn.CUDA_GRAPHS) for name, _ in references(mod))


def _next_to_graphs(f: Finding) -> Finding:
    """CUDA graph capture needs a side stream for warm-up (PyTorch's documented pattern) and
    graphs are replayed per input shape; the evaluator synchronises the whole device and rechecks
    timed outputs on fresh inputs, so next to graphs these are reported, not rejected."""
    shape_cache = f.code == "result_cache" and rules_forward.SHAPE_KEY in f.reason
    if f.code == "side_stream" or shape_cache:
        return Finding(f.code, f.reason + " (next to CUDA graph capture: reported only)", "warn",
                       f.line)
    return f


def references(mod: PyModule) -> Iterator[tuple[str, Node]]:
    """Every maximal identifier/attribute chain used in code, with its canonical name."""
    for node in ts.walk(mod.root):
        if node.type not in ("attribute", "identifier", "call"):
            continue
        parent = node.parent
        if parent is None or _is_binding_site(node, parent):
            continue
        if parent.type == "attribute" and parent.child_by_field_name("object") == node:
            continue  # the longer chain is reported instead
        if node.type == "identifier" and parent.type == "attribute":
            continue  # the attribute field of a chain
        name = mod.resolve_imported(node)
        if name is not None and (node.type != "call" or "." in name):
            yield name, node


def _is_binding_site(node: Node, parent: Node) -> bool:
    if parent.type in ("import_statement", "import_from_statement", "aliased_import",
                       "dotted_name", "parameters", "default_parameter", "typed_parameter",
                       "typed_default_parameter", "global_statement", "nonlocal_statement"):
        return True
    if parent.type == "keyword_argument" and parent.child_by_field_name("name") == node:
        return True
    return parent.type in ("function_definition", "class_definition") and \
        parent.child_by_field_name("name") == node


def _imports(mod: PyModule) -> Iterator[Finding]:
    rules = (*rn.NAME_RULES, *rn.IMPORT_RULES)
    temp = temp_paths.temp_names(mod)
    for imp in mod.imports:
        for rule in rules:
            if not rule.matches(imp.module):
                continue
            if rule.code == "file_write" and _only_temp_uses(mod, imp.module, temp):
                yield Finding("temp_write", f"imports `{imp.module}`, used only on its own temp "
                              "dir", "warn", imp.line)
            else:
                yield Finding(rule.code, f"imports `{imp.module}`: {rule.reason}",
                              rule.severity, imp.line)


def _names(mod: PyModule) -> Iterator[Finding]:
    temp = temp_paths.temp_names(mod)
    for name, node in references(mod):
        for rule in rn.NAME_RULES:
            if not rule.matches(name):
                continue
            if rule.code == "file_write" and _temp_call(mod, node, temp):
                yield Finding("temp_write", f"`{name}` {_TEMP_WRITE}", "warn", ts.line(node))
            else:
                yield Finding(rule.code, f"`{name}`: {rule.reason}", rule.severity,
                              ts.line(node))


def _temp_call(mod: PyModule, func: Node, temp: set[str]) -> bool:
    """``func(path, ...)`` is a call whose positional arguments are all temp-derived paths
    (``shutil.copy(tmp, "/elsewhere")`` is not)."""
    call = func.parent
    if call is None or call.type != "call" or call.child_by_field_name("function") != func:
        return False
    args, _ = call_arguments(call)
    return bool(args) and all(temp_paths.mentions_temp(mod, a, temp) for a in args)


def _only_temp_uses(mod: PyModule, module: str, temp: set[str]) -> bool:
    uses = [node for name, node in references(mod) if rn.matches(module, name)]
    return bool(uses) and all(_temp_call(mod, node, temp) for node in uses)


def _attributes(mod: PyModule) -> Iterator[Finding]:
    for node in ts.walk(mod.root):
        if node.type == "attribute":
            attr = ts.text(node.child_by_field_name("attribute"))
        elif node.type == "function_definition":
            attr = ts.text(node.child_by_field_name("name"))
        elif node.type == "identifier" and ts.text(node) == "__builtins__":
            attr = "__builtins__"
        else:
            continue
        rule = rn.ATTRIBUTE_RULES.get(attr)
        if rule is not None:
            yield Finding(rule.code, rule.reason, rule.severity, ts.line(node))


def _assignment_targets(mod: PyModule) -> Iterator[Node]:
    for node in ts.walk(mod.root):
        if node.type in ("assignment", "augmented_assignment"):
            left = node.child_by_field_name("left")
            if left is not None:
                yield from _flatten_targets(left)
        elif node.type == "delete_statement":
            for child in node.named_children:
                yield from _flatten_targets(child)


def _flatten_targets(node: Node) -> Iterator[Node]:
    if node.type in ("pattern_list", "tuple_pattern", "list_pattern", "expression_list",
                     "tuple", "list"):
        for child in node.named_children:
            yield from _flatten_targets(child)
    else:
        yield node


def _assignments(mod: PyModule) -> Iterator[Finding]:
    for target in _assignment_targets(mod):
        obj = target.child_by_field_name("object") if target.type == "attribute" else None
        if target.type == "subscript":
            obj = target.child_by_field_name("value")
        if obj is None:
            continue
        base = mod.resolve_imported(obj)
        if base is None:
            continue
        full = mod.resolve(target) if target.type == "attribute" else f"{base}[...]"
        yield from _judge_assignment(base, full or base, target)


def _judge_assignment(base: str, full: str, target: Node) -> Iterator[Finding]:
    line = ts.line(target)
    attr = full.rsplit(".", 1)[-1]
    if attr in rn.PRECISION_FLAGS and _assigned_value(target) == "True":
        yield Finding("precision", f"`{full} = True` allows reduced-precision math", "warn", line)
        return
    if any(rn.matches(ns, base) for ns in rn.SETTING_NAMESPACES):
        yield Finding("global_setting", f"sets `{full}`: a global torch setting (reported; "
                      "restored before the reference is timed)", "warn", line)
        return
    if base == "os.environ" or base.startswith("os.environ."):
        yield Finding("environment", f"writes `{full}`", "warn", line)
        return
    if any(rn.matches(ns, base) for ns in rn.PROTECTED) or base.endswith("__dict__"):
        yield Finding("patching", f"assigns `{full}`: monkeypatching a library or timer changes "
                      "what the reference or the clock does", "reject", line)


def _assigned_value(target: Node) -> str:
    parent = target.parent
    while parent is not None and parent.type not in ("assignment", "augmented_assignment"):
        parent = parent.parent
    right = parent.child_by_field_name("right") if parent is not None else None
    return ts.text(right)


def _calls(mod: PyModule) -> Iterator[Finding]:
    temp = temp_paths.temp_names(mod)
    for node in ts.walk(mod.root):
        if node.type != "call":
            continue
        func = node.child_by_field_name("function")
        if func is None:
            continue
        name = mod.resolve(func) or ""
        attr = ts.text(func.child_by_field_name("attribute")) if func.type == "attribute" else ""
        yield from _judge_call(mod, node, name, attr, temp)


def _judge_call(mod: PyModule, call: Node, name: str, attr: str,
                temp: set[str]) -> Iterator[Finding]:
    line = ts.line(call)
    args, kwargs = call_arguments(call)
    func = call.child_by_field_name("function")
    target = args[0] if name == "builtins.open" and args else \
        (func.child_by_field_name("object") if func is not None and attr else None)
    if name in ("builtins.setattr", "builtins.delattr") and args:
        base = mod.resolve_imported(args[0])
        if base is not None and any(rn.matches(ns, base) for ns in rn.PROTECTED) \
                and not any(rn.matches(ns, base) for ns in rn.SETTING_NAMESPACES):
            yield Finding("patching", f"`{name.split('.')[-1]}({base}, ...)` monkeypatches a "
                          "library or timer", "reject", line)
    elif name == "builtins.vars" and args and _is_protected(mod, args[0]):
        yield Finding("patching", "reads a library's namespace through vars()", "reject", line)
    elif (name == "builtins.open" and _open_writes(args, kwargs)) or \
            attr in ("write_text", "write_bytes"):
        what = "opens a file for writing" if name == "builtins.open" \
            else f"`.{attr}()` writes a file"
        if temp_paths.mentions_temp(mod, target, temp):
            yield Finding("temp_write", f"{what}: {_TEMP_WRITE}", "warn", line)
        else:
            yield Finding("file_write", what, "reject", line)
    elif name == "builtins.__import__" or name.endswith("import_module"):
        yield Finding("introspection", "imports a module dynamically, hidden from the gate",
                      "reject", line)
    elif name == "torch.set_float32_matmul_precision" and args \
            and ts.string_value(args[0]) in ("high", "medium"):
        yield Finding("precision", "lowers float32 matmul precision (TF32/bf16 internally)",
                      "warn", line)


def _is_protected(mod: PyModule, node: Node) -> bool:
    base = mod.resolve_imported(node)
    return base is not None and any(rn.matches(ns, base) for ns in rn.PROTECTED)


def _open_writes(args: list[Node], kwargs: dict[str, Node]) -> bool:
    mode_node = kwargs.get("mode") or (args[1] if len(args) > 1 else None)
    if mode_node is None:
        return False
    mode = ts.string_value(mode_node)
    return mode is None or bool(_WRITE_MODES & set(mode))


def _classes(mod: PyModule) -> Iterator[Finding]:
    for node in ts.walk(mod.root):
        if node.type != "class_definition":
            continue
        supers = node.child_by_field_name("superclasses")
        for base in supers.named_children if supers is not None else []:
            name = mod.resolve(base) or ""
            if name in ("torch.Tensor", "torch._C.TensorBase", "torch._C._TensorBase") \
                    or name.startswith("torch._subclasses"):
                yield Finding("tensor_subclass", f"class derives from `{name}`: tensor subclasses "
                              "can return lazy or fake results", "reject", ts.line(node))
