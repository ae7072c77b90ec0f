"""Gate rules that compare the candidate with its problem: ModelNew, sizes, inputs, fallbacks."""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Iterator

from tree_sitter import Node

from cudal1_tui.analysis import rules_names as rn
from cudal1_tui.analysis import source_tree as ts
from cudal1_tui.analysis.findings import Finding
from cudal1_tui.analysis.parsed_problem import ParsedProblem, mode_calls
from cudal1_tui.analysis.pymodule import PyModule

_INPUT_FUNCTIONS = ("get_inputs", "get_init_inputs")
_DEVICE_TOKENS = frozenset({"cuda", "device", "to", "cpu"})
# Tensor plumbing shared by any code: calling these in a handler is no fallback.
_PLUMBING = frozenset({"view", "reshape", "contiguous", "size", "dim", "item", "to", "float",
                       "cuda", "cpu", "unsqueeze", "squeeze", "permute", "transpose", "expand",
                       "flatten", "clone", "detach", "numel", "type", "append", "format"})
_OPS: dict[type, Callable[..., object]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv, ast.Div: operator.truediv, ast.Pow: operator.pow,
    ast.Mod: operator.mod, ast.LShift: operator.lshift, ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}


def check(cand: PyModule, prob: ParsedProblem) -> list[Finding]:
    ref = prob.module
    return [*_model_new(cand), *_model_use(cand), *_sizes(cand, ref), *_inputs(cand, ref),
            *_fallbacks(cand, ref), *_precision(cand, prob), *_mode_switch(cand, prob)]


def _model_new(cand: PyModule) -> Iterator[Finding]:
    if "ModelNew" not in cand.classes():
        yield Finding("missing_modelnew", "no top-level `class ModelNew` found: the candidate "
                      "must define ModelNew with Model's constructor and forward signatures",
                      "reject", 0)


def _model_use(cand: PyModule) -> Iterator[Finding]:
    """``class ModelNew(Model)``, ``Model(...)``, ``Model.forward``: running the reference."""
    for node in ts.walk(cand.root):
        if node.type != "identifier" or ts.text(node) != "Model":
            continue
        parent = node.parent
        if parent is None or parent.type in ("class_definition", "import_from_statement",
                                             "dotted_name", "aliased_import"):
            continue
        where = "subclasses" if parent.type == "argument_list" and \
            parent.parent is not None and parent.parent.type == "class_definition" else "uses"
        yield Finding("reference_fallback", f"{where} the reference `Model`: the candidate would "
                      "run the reference instead of its own code", "reject", ts.line(node))


def _sizes(cand: PyModule, prob: PyModule) -> Iterator[Finding]:
    prob_values = _constants(prob)
    cand_assigned = cand.assignments()
    cand_values = _constants(cand)
    for name, value in prob_values.items():
        if name not in cand_assigned:
            continue
        mine = cand_values.get(name)
        line = ts.line(cand_assigned[name])
        if mine is None:
            yield Finding("changed_sizes", f"redefines the problem's `{name}` with a value the "
                          "gate cannot evaluate", "warn", line)
        elif mine != value:
            yield Finding("changed_sizes", f"redefines the problem's `{name}` = {value!r} as "
                          f"{mine!r}: sizes belong to the problem", "reject", line)


def _constants(mod: PyModule) -> dict[str, object]:
    """Module-level numeric constants (literals and arithmetic over earlier constants)."""
    values: dict[str, object] = {}
    for name, node in mod.assignments().items():
        try:
            values[name] = _evaluate(ast.parse(ts.text(node), mode="eval").body, values)
        except (SyntaxError, ValueError, KeyError, TypeError, ZeroDivisionError, OverflowError):
            continue
    return values


def _evaluate(node: ast.expr, env: dict[str, object]) -> object:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float | str | bool):
        return node.value
    if isinstance(node, ast.Name):
        return env[node.id]
    if isinstance(node, ast.Tuple | ast.List):
        return tuple(_evaluate(e, env) for e in node.elts)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_evaluate(node.operand, env))
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        right = _evaluate(node.right, env)
        if isinstance(node.op, ast.Pow) and isinstance(right, int) and right > 64:
            raise ValueError("exponent too large")
        return _OPS[type(node.op)](_evaluate(node.left, env), right)
    raise ValueError("not a constant")


def _inputs(cand: PyModule, prob: PyModule) -> Iterator[Finding]:
    """A candidate's own ``get_inputs``/``get_init_inputs`` never runs: the evaluator makes
    inputs from the problem. Models often copy them into their reply; that is only noted."""
    theirs, mine = prob.functions(), cand.functions()
    for name in _INPUT_FUNCTIONS:
        if name not in mine:
            continue
        line = ts.line(mine[name])
        if name not in theirs:
            how = "which the problem does not define"
        elif _tokens(mine[name]) != _tokens(theirs[name]):
            how = "different from the problem's"
        else:
            how = "a copy of the problem's"
        yield Finding("own_inputs", f"defines its own `{name}`, {how}: ignored (the evaluator "
                      "makes inputs and sizes from the problem)", "info", line)


def _tokens(func: Node) -> list[str]:
    """Identifier and literal tokens of a function body, device placement left out."""
    body = func.child_by_field_name("body")
    out = []
    for node in ts.walk(body) if body is not None else []:
        if node.child_count or node.type == "comment":
            if node.type == "string":
                value = ts.string_value(node) or ""
                if not value.startswith("cuda") and value != "cpu":
                    out.append(repr(value))
            continue
        token = ts.text(node)
        if node.type in ("identifier", "integer", "float", "true", "false", "none") \
                and token not in _DEVICE_TOKENS:
            out.append(token)
    return out


def _fallbacks(cand: PyModule, prob: PyModule) -> Iterator[Finding]:
    """``try: kernel(...) except: return torch.matmul(...)``: the reference op as a safety net.
    Harmless while the kernel works, so only warned about here; whether the fallback is taken
    is seen at run time (``candidate_side.profiling``: the reference's kernels doing the work)."""
    ref_calls, ref_methods = _reference_ops(prob)
    for node in ts.walk(cand.root):
        if node.type != "except_clause":
            continue
        for sub in ts.walk(node):
            if sub.type != "call":
                continue
            func = sub.child_by_field_name("function")
            if func is None:
                continue
            what = _fallback_call(cand, func, ref_calls, ref_methods)
            if what is not None:
                yield Finding("reference_fallback", f"an `except` handler calls {what}: if the "
                              "kernel fails, the reference's op does the work (a warning here; "
                              "the profile rejects a fallback that is taken)", "warn",
                              ts.line(sub))
                break


def _fallback_call(cand: PyModule, func: Node, ref_calls: set[str],
                   ref_methods: set[str]) -> str | None:
    text = ts.text(func).replace(" ", "")
    if text.startswith("super(") and text.endswith(".forward"):
        return "`super().forward`"
    name = cand.resolve(func)
    if name is not None and name in ref_calls:
        return f"the reference's `{name}`"
    if func.type == "attribute":
        attr = ts.text(func.child_by_field_name("attribute"))
        obj = func.child_by_field_name("object")
        base = cand.resolve(obj) if obj is not None else None
        if attr in ref_methods and (base is None or not base.startswith(("torch", "builtins"))):
            return f"the reference's `.{attr}(...)`"
    return None


def _reference_ops(prob: PyModule) -> tuple[set[str], set[str]]:
    """Canonical torch calls and method/submodule names used by the problem's ``Model.forward``."""
    model = prob.classes().get("Model")
    calls: set[str] = set()
    methods: set[str] = set()
    for node in ts.walk(model) if model is not None else []:
        if node.type != "function_definition" or \
                ts.text(node.child_by_field_name("name")) != "forward":
            continue
        for sub in ts.walk(node):
            func = sub.child_by_field_name("function") if sub.type == "call" else None
            if func is None:
                continue
            name = prob.resolve(func)
            if name is not None and name.startswith("torch"):
                calls.add(name)
            elif func.type == "attribute":
                methods.add(ts.text(func.child_by_field_name("attribute")))
    return calls, methods - _PLUMBING


def _precision(cand: PyModule, prob: ParsedProblem) -> Iterator[Finding]:
    if not prob.fp32:
        return
    for node in ts.walk(cand.root):
        if node.type != "attribute":
            continue
        name = cand.resolve(node) or ""
        attr = ts.text(node.child_by_field_name("attribute"))
        is_method = node.parent is not None and node.parent.type == "call" and \
            not name.startswith("torch")
        if any(rn.matches(p, name) for p in rn.PRECISION_NAMES) or \
                (is_method and attr in rn.PRECISION_METHODS):
            yield Finding("precision", f"`{ts.text(node)}` on an fp32 problem: reduced precision "
                          "(the runtime tolerance decides whether it is acceptable)", "warn",
                          ts.line(node))


def _mode_switch(cand: PyModule, prob: ParsedProblem) -> Iterator[Finding]:
    """The reference runs as constructed (training mode unless it switches itself): a
    candidate that switches to eval mode changes what BatchNorm and Dropout compute."""
    if prob.switches_mode:
        return
    for node in mode_calls(cand):
        yield Finding("mode_switch", f"`{ts.text(node)}` puts the candidate in eval mode, while "
                      "the reference runs in training mode: BatchNorm then uses running "
                      "statistics and Dropout turns off (folding BatchNorm is only valid in "
                      "eval mode)", "warn", ts.line(node))
