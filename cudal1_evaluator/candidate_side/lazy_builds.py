"""Extensions a candidate builds lazily, found and built ahead of time by the build stage.

Real kernels often call ``load_inline``/``load`` inside ``__init__`` or on the first
``forward``; a build stage that only imports the module leaves that compile (30-70 s of nvcc)
to the evaluation, while the GPU waits. The build child therefore also

* constructs ``ModelNew`` on the CPU with the problem's init inputs (``__init__`` builds), and
* builds every ``load_inline``/``load`` call found inside a function or method whose arguments
  are literals or module-level values of the imported candidate (``forward`` builds).

It never calls ``forward``: that would need inputs at full size on the CPU and could run
arbitrary amounts of candidate code; a call whose arguments are computed at run time
(``self.src``, an f-string over shapes) is left to the evaluation and counted as skipped.
Everything here runs inside the build child's guard and sandbox (it is candidate code).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import torch.utils.cpp_extension as cpp_extension

_UNKNOWN = object()


@dataclass
class LazyCalls:
    """The build functions called ahead of time, those whose build failed, and how many calls
    could not be made."""

    built: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    skipped: int = 0


def construct(module: ModuleType, problem: ModuleType) -> None:
    """``ModelNew(*get_init_inputs())`` on the CPU; exceptions go to the caller."""
    init_inputs = list(problem.get_init_inputs()) if hasattr(problem, "get_init_inputs") else []
    module.ModelNew(*init_inputs)


def build_calls_in_functions(module: ModuleType, source: str) -> LazyCalls:
    """Call every ``load_inline``/``load`` found in a function body whose arguments evaluate
    statically against the module's globals. Building ahead is a cache warm-up, never a
    verdict: a call that fails here may sit inside the candidate's own ``try/except`` (an
    optional build with a fallback), so its failure is noted and the evaluation decides.
    The guard's refusals (PermissionError) propagate."""
    outcome = LazyCalls()
    builders: dict[int, Callable[..., Any]] = {
        id(cpp_extension.load_inline): cpp_extension.load_inline,
        id(cpp_extension.load): cpp_extension.load,
    }
    for call, local_names in _calls_in_functions(ast.parse(source)):
        # a module-level name shadowed by a local one is not that module-level value
        env = {k: v for k, v in vars(module).items() if k not in local_names}
        target = _evaluate(call.func, env)
        builder = builders.get(id(target))
        if builder is None:
            continue
        args = [_evaluate(a, env) for a in call.args]
        kwargs = {k.arg: _evaluate(k.value, env) for k in call.keywords if k.arg is not None}
        if any(v is _UNKNOWN for v in (*args, *kwargs.values())) or \
                any(k.arg is None for k in call.keywords):
            outcome.skipped += 1
            continue
        name = str(kwargs.get("name", args[0] if args else "?"))
        try:
            builder(*args, **kwargs)
        except PermissionError:
            raise
        except Exception:
            outcome.failed.append(name)
            continue
        outcome.built.append(name)
    return outcome


def _calls_in_functions(tree: ast.Module) -> list[tuple[ast.Call, set[str]]]:
    """Each call inside a function, with the names that function binds locally."""
    calls: dict[int, tuple[ast.Call, set[str]]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            local = {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)}
            local |= {n.id for n in ast.walk(node)
                      if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
            for call in (c for c in ast.walk(node) if isinstance(c, ast.Call)):
                calls.setdefault(id(call), (call, set()))[1].update(local)
    return list(calls.values())


def _evaluate(node: ast.expr, env: dict[str, Any]) -> Any:
    """Literals, module-level names and their attributes, lists, dicts and ``+``; anything
    else is ``_UNKNOWN`` (nothing is called while evaluating)."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return env.get(node.id, _UNKNOWN)
    if isinstance(node, ast.Attribute):
        base = _evaluate(node.value, env)
        return _UNKNOWN if base is _UNKNOWN or not isinstance(base, ModuleType) \
            else getattr(base, node.attr, _UNKNOWN)
    if isinstance(node, ast.List | ast.Tuple):
        items = [_evaluate(e, env) for e in node.elts]
        return _UNKNOWN if any(i is _UNKNOWN for i in items) else items
    if isinstance(node, ast.Dict) and all(k is not None for k in node.keys):
        pairs = [(_evaluate(k, env), _evaluate(v, env))  # type: ignore[arg-type]
                 for k, v in zip(node.keys, node.values, strict=True)]
        return _UNKNOWN if any(k is _UNKNOWN or v is _UNKNOWN for k, v in pairs) \
            else dict(pairs)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _evaluate(node.left, env), _evaluate(node.right, env)
        ok = type(left) is type(right) and isinstance(left, str | list)
        return left + right if ok else _UNKNOWN
    return _UNKNOWN
