"""Static inspection of a problem file with tree-sitter: is the contract there, and what it takes.

Nothing here executes the file; the probe (a subprocess) does that afterwards.
"""

from __future__ import annotations

import ast
import difflib
import re
from dataclasses import dataclass, field

from tree_sitter import Node

from cudal1_tui.analysis.source_tree import (
    CPythonError,
    cpython_error,
    first_error,
    parse_python,
    position,
    text,
    top_level,
)
from cudal1_tui.analysis.source_tree import matches as _matches
from cudal1_tui.problem.model import Inspection, Issue
from cudal1_tui.problem.signature import signature
from cudal1_tui.problem.sizing import constants_in

_NATIVE_SUFFIXES = (".cu", ".cuh", ".cpp", ".cc", ".cxx", ".c", ".h", ".hpp")
_NATIVE_MARKERS = re.compile(
    r"^\s*#\s*include\s*[<\"]|^\s*#\s*(define|pragma)\s|__global__|__device__|\bint\s+main\s*\(|"
    r"\btemplate\s*<|\bstd::|^\s*(void|int|float|auto)\s+\w+\s*\(.*\)\s*\{",
    re.MULTILINE,
)
_NN_MODULE = {"torch.nn.Module"}
_IMPORT_QUERY = """
(module [(import_statement) (import_from_statement)] @import)
"""
_REQUIRED_FUNCTIONS = {
    "get_inputs": "returns the list of forward inputs",
    "get_init_inputs": "returns Model's constructor arguments",
}


@dataclass
class _Scope:
    """Module-level names: classes, functions, other bindings, and import aliases."""

    classes: dict[str, Node] = field(default_factory=dict)
    functions: dict[str, Node] = field(default_factory=dict)
    assigned: dict[str, Node] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)  # local name -> dotted origin


def inspect_source(source: str, path: str = "<problem>") -> Inspection:
    """Everything wrong with ``source`` as a problem file, plus what its Model takes."""
    result = Inspection(path=path)
    if not source.strip():
        result.problems.append(Issue("the file is empty"))
        return result
    root = parse_python(source).root_node
    if _looks_native(source, path, root):
        result.problems.append(Issue(
            "this is C/C++/CUDA source, not a Python module: a problem file is PyTorch code "
            "defining `class Model`; a CUDA kernel belongs in a candidate (ModelNew) instead"))
        return result
    syntax = _syntax_issues(root, source)
    scope = _scope(root)
    result.imports = [text(node) for match in _matches("python", _IMPORT_QUERY, root)
                      for node in match.get("import", [])]
    result.sizes = constants_in(root)
    result.docstring = _module_docstring(root)
    _check_model(scope, result)
    for name, role in _REQUIRED_FUNCTIONS.items():
        result.problems += _check_function(scope, name, role)
    if syntax:  # error recovery can swallow definitions: drop "missing" claims the text refutes
        result.problems = syntax + [p for p in result.problems if not _refuted(p, source)]
    result.problems.sort(key=_order)
    return result


def _order(issue: Issue) -> tuple[bool, bool, float, int]:
    """Errors first, a syntax error before all, then by position, file-wide ones last."""
    return (issue.severity != "error", not issue.message.startswith("syntax error"),
            issue.line or float("inf"), issue.col)


_TEXTUAL = {
    "`class Model` has no `forward`": r"^\s+def\s+forward\s*\(",
    "`def get_inputs()` is missing": r"^def\s+get_inputs\s*\(",
    "`def get_init_inputs()` is missing": r"^def\s+get_init_inputs\s*\(",
    "no `class Model": r"^class\s+Model\b",
}


def _refuted(issue: Issue, source: str) -> bool:
    return any(issue.message.startswith(prefix) and re.search(pattern, source, re.MULTILINE)
               for prefix, pattern in _TEXTUAL.items())


def _looks_native(source: str, path: str, root: Node) -> bool:
    if path.lower().endswith(_NATIVE_SUFFIXES):
        return True
    return root.has_error and bool(_NATIVE_MARKERS.search(_without_strings(source, root)))


def _without_strings(source: str, root: Node) -> str:
    """The source with Python string literals blanked (a load_inline file embeds CUDA)."""
    data = bytearray(source.encode("utf-8"))
    for match in _matches("python", "(string) @s", root):
        for node in match["s"]:
            data[node.start_byte:node.end_byte] = b" " * (node.end_byte - node.start_byte)
    return data.decode("utf-8", errors="replace")


def _syntax_issues(root: Node, source: str) -> list[Issue]:
    python = _python_syntax_error(source)  # parsing runs nothing
    error = first_error(root)
    if error is None:  # tree-sitter accepts a few things CPython rejects (py2 print, ...)
        return [Issue(f"syntax error: {python.message}", python.line or 0, python.column or 0)
                ] if python else []
    line, col = position(error)
    if error.is_missing:
        what = f": missing `{error.type}`"
    else:
        snippet = text(error).strip().splitlines()[0][:40] if text(error).strip() else ""
        what = f" near `{snippet}`" if snippet else ""
    detail = f" (Python: {python.message}, line {python.line})" if python else ""
    return [Issue(f"syntax error{what}{detail}", line, col)]


def _python_syntax_error(source: str) -> CPythonError | None:
    error = cpython_error(source)
    return error if error is not None and error.syntax else None  # NUL bytes: the loader


def _scope(root: Node) -> _Scope:
    scope = _Scope()
    for node in top_level(root):
        name = text(node.child_by_field_name("name"))
        if node.type == "class_definition":
            scope.classes[name] = node
        elif node.type == "function_definition":
            scope.functions[name] = node
        elif node.type == "expression_statement" and node.named_children:
            _record_assignment(node.named_children[0], scope)
        elif node.type in ("import_statement", "import_from_statement"):
            _record_import(node, scope)
    return scope


def _record_assignment(node: Node, scope: _Scope) -> None:
    if node.type == "assignment":
        left = node.child_by_field_name("left")
        if left is not None and left.type == "identifier":
            scope.assigned[text(left)] = node


def _record_import(node: Node, scope: _Scope) -> None:
    module = text(node.child_by_field_name("module_name"))
    for child in node.children_by_field_name("name"):
        if child.type == "aliased_import":
            origin = text(child.child_by_field_name("name"))
            local = text(child.child_by_field_name("alias"))
        else:
            origin = local = text(child)
            local = local.split(".")[0]
            origin = origin if module else local
        scope.aliases[local] = f"{module}.{origin}" if module else origin


def _resolve(dotted: str, scope: _Scope) -> str:
    head, _, rest = dotted.partition(".")
    origin = scope.aliases.get(head, head)
    return f"{origin}.{rest}" if rest else origin


def _derives_from_module(cls: Node, scope: _Scope, seen: frozenset[str] = frozenset()) -> bool:
    for base in _bases(cls):
        if _resolve(base, scope) in _NN_MODULE:
            return True
        parent = scope.classes.get(base)
        if parent is not None and base not in seen and _derives_from_module(
            parent, scope, seen | {base}
        ):
            return True
    return False


def _bases(cls: Node) -> list[str]:
    args = cls.child_by_field_name("superclasses")
    if args is None:
        return []
    return [text(a) for a in args.named_children if a.type in ("identifier", "attribute")]


def _method(cls: Node, name: str, scope: _Scope, depth: int = 0) -> Node | None:
    body = cls.child_by_field_name("body")
    for node in top_level(body) if body is not None else []:
        if node.type == "function_definition" and text(node.child_by_field_name("name")) == name:
            return node
    for base in _bases(cls):  # inherited from a class in the same file
        parent = scope.classes.get(base)
        if parent is not None and depth < 8:
            found = _method(parent, name, scope, depth + 1)
            if found is not None:
                return found
    return None


def _check_model(scope: _Scope, result: Inspection) -> None:
    model = scope.classes.get("Model")
    if model is None:
        result.problems.append(_missing_model(scope))
        return
    line, col = position(model)
    result.docstring = _class_docstring(model) or result.docstring
    if not _derives_from_module(model, scope):
        bases = ", ".join(_bases(model)) or "nothing"
        result.problems.append(Issue(
            f"`class Model` must derive from nn.Module (torch.nn.Module); it derives from {bases}",
            line, col))
    init = _method(model, "__init__", scope)
    if init is not None:
        result.init = signature(init, method=True)
    forward = _method(model, "forward", scope)
    if forward is None:
        result.problems.append(Issue(
            "`class Model` has no `forward` method: define `def forward(self, x, ...)` "
            "returning a tensor (or a tuple of tensors)", line, col))
        return
    result.forward = signature(forward, method=True)
    result.problems += _check_forward(forward, result)


def _check_forward(forward: Node, result: Inspection) -> list[Issue]:
    line, col = position(forward)
    assert result.forward is not None
    params = result.forward.params
    kinds = {p.kind for p in params}
    if not _has_self(forward):
        return [Issue("`forward` takes no `self`: write `def forward(self, x, ...)`", line, col)]
    if kinds == {"var_positional"} or kinds == {"var_positional", "var_keyword"}:
        return [Issue(
            "`forward` takes only *args: name its inputs (forward(self, x, w)) so candidates "
            "can be checked against the same signature", line, col, severity="warning")]
    if not params:
        return [Issue("`forward` takes no inputs: its output cannot depend on get_inputs(), "
                      "so any constant answer would pass", line, col, severity="warning")]
    return []


def _has_self(function: Node) -> bool:
    params = function.child_by_field_name("parameters")
    first = params.named_children[0] if params is not None and params.named_children else None
    return first is not None and first.type in ("identifier", "typed_parameter")


def _missing_model(scope: _Scope) -> Issue:
    if "ModelNew" in scope.classes:
        line, col = position(scope.classes["ModelNew"])
        return Issue(
            "found `class ModelNew` but no `class Model`: this looks like a candidate "
            "(an optimized version); the problem file must hold the reference `class Model` "
            "(evaluate a candidate with `cudal1-tui eval PROBLEM CANDIDATE`)", line, col)
    if "Model" in scope.aliases:
        return Issue(f"`Model` is imported (`{scope.aliases['Model']}`); the problem file must "
                     "define `class Model` itself: it runs alone in the evaluator")
    modules = [n for n, c in scope.classes.items() if _derives_from_module(c, scope)]
    if modules:
        line, col = position(scope.classes[modules[0]])
        return Issue(f"no `class Model`; found `class {modules[0]}(nn.Module)`: rename it "
                     "to `Model`", line, col)
    return Issue("no `class Model(nn.Module)` at module level")


def _check_function(scope: _Scope, name: str, role: str) -> list[Issue]:
    node = scope.functions.get(name)
    if node is None:
        if name in scope.assigned:
            return []  # e.g. get_inputs = lambda: [...]; the probe checks what it returns
        others = [f for f in scope.functions if f not in _REQUIRED_FUNCTIONS]
        near = difflib.get_close_matches(name, others, n=1, cutoff=0.75)
        hint = f" (found `{near[0]}`: the name must be exactly `{name}`)" if near else ""
        return [Issue(f"`def {name}()` is missing: it {role}{hint}")]
    line, col = position(node)
    params = signature(node, method=False).params
    required = [p.name for p in params if p.default is None and p.kind in
                ("positional", "positional_only", "keyword_only")]
    if required:
        return [Issue(f"`{name}` takes parameters ({', '.join(required)}); the evaluator calls "
                      f"`{name}()` with none: read sizes from module-level constants", line, col)]
    if params:
        return [Issue(f"`{name}` declares parameters; the evaluator calls it with none, so "
                      "only their defaults are used", line, col, severity="warning")]
    return []


def _docstring_of(body: Node | None) -> str:
    if body is None or not body.named_children:
        return ""
    first = body.named_children[0]
    if first.type == "expression_statement" and first.named_children and \
            first.named_children[0].type == "string":
        try:
            value = ast.literal_eval(text(first.named_children[0]))
        except (ValueError, SyntaxError):
            return ""
        return str(value).strip()
    return ""


def _module_docstring(root: Node) -> str:
    return _docstring_of(root)


def _class_docstring(cls: Node) -> str:
    return _docstring_of(cls.child_by_field_name("body"))
