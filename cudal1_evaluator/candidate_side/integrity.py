"""Runtime integrity checks used inside the evaluator's worker process.

The worker (evaluator core) calls these at fixed points. Each returns ``Flag``s.

Call order in the worker:
    guard = install_guards()                 # before the candidate is imported
    before = snapshot_globals()              # after harness imports, before candidate
    settings0 = snapshot_settings()
    ... import candidate (compile) ...
    flags += diff_globals(before, snapshot_globals())
    flags += check_candidate_namespace(problem_ns, candidate_ns)
    guard.lock_down()                        # records -> refuses; re-snapshots the globals
    flags += check_outputs(outputs, expected)   # per trial, before numeric comparison
    flags += guard.findings()                # threads, streams, audit events, late patches
    changed = diff_settings(settings0, snapshot_settings()); restore_settings(settings0)

The pieces live in ``candidate_side.guard`` (audit hook, threads, streams; blame by origin in
``candidate_side.origin``), ``candidate_side.snapshots`` (library identities, global settings) and
``candidate_side.native_state`` (dispatcher kernels, mode stacks, global hooks, autocast, signals,
timers, affinity, niceness, carried in ``GlobalsSnapshot.native``); this module is the
contract. The OS sandbox (``isolation.confine``) is applied when the child starts; installing
the guards narrows its writable dirs to the candidate's own.
"""

from __future__ import annotations

import types
from collections.abc import Iterable
from typing import Any

import torch

from cudal1_evaluator.candidate_side.guard import Guard
from cudal1_evaluator.candidate_side.guard import install as _install
from cudal1_evaluator.candidate_side.snapshots import (
    GlobalsSnapshot,
    SettingsSnapshot,
    diff_globals,
    diff_settings,
    restore_call_settings,
    restore_settings,
    snapshot_globals,
    snapshot_settings,
)
from cudal1_evaluator.isolation import confine
from cudal1_evaluator.schema import Flag

__all__ = [
    "GlobalsSnapshot",
    "Guard",
    "SettingsSnapshot",
    "check_candidate_namespace",
    "check_outputs",
    "diff_globals",
    "diff_settings",
    "install_guards",
    "restore_call_settings",
    "restore_settings",
    "snapshot_globals",
    "snapshot_settings",
]

_INPUT_FUNCTIONS = ("get_inputs", "get_init_inputs")


def install_guards(allowed_write_dirs: Iterable[str] = (),
                   trusted_dirs: Iterable[str] = (), *,
                   candidate_paths: Iterable[str] = ()) -> Guard:
    """Start watching: audit hook (processes, sockets, ctypes, frames, gc, file writes),
    thread starts and CUDA stream creation by candidate code. The temp dir is always writable.

    Candidate code, by origin: files under ``allowed_write_dirs`` (its build dir and workdir),
    under the child's private temp dir, and ``candidate_paths`` (files or dirs), plus code it
    compiles itself. ``trusted_dirs`` are library dirs that are never candidate code even when
    they lie inside those. In an evaluator child whose OS sandbox lets a process narrow its
    writable dirs further (landlock), the writes are narrowed to these dirs here, too."""
    own = [*allowed_write_dirs]
    candidate = [*candidate_paths, *confine.private_dirs()]
    confine.narrow_writes(own)
    return _install(own, trusted_dirs, candidate_paths=candidate)


# -- the candidate's module namespace ---------------------------------------------------------

def check_candidate_namespace(problem_ns: dict[str, object], candidate_ns: dict[str, object]
                              ) -> list[Flag]:
    flags: list[Flag] = []
    model_new = candidate_ns.get("ModelNew")
    if not isinstance(model_new, type):
        flags.append(Flag("missing_modelnew", "the candidate defines no class ModelNew"))
    else:
        flags += _reference_in_mro(model_new, problem_ns.get("Model"))
    for name in _INPUT_FUNCTIONS:
        mine, theirs = candidate_ns.get(name), problem_ns.get(name)
        if mine is not None and mine is not theirs and not _same_function(mine, theirs):
            flags.append(Flag("own_inputs", f"the candidate defines its own `{name}` (ignored: "
                              "the evaluator makes inputs from the problem)", "warn"))
    for name, value in problem_ns.items():
        if name.startswith("_") or isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if name in candidate_ns and candidate_ns[name] != value:
            flags.append(Flag("size_changed", f"the candidate sets `{name}` = "
                              f"{candidate_ns[name]!r}, the problem {value!r} (ignored: sizes "
                              "belong to the problem)", "warn"))
    return flags


def _reference_in_mro(model_new: type, model: Any) -> list[Flag]:
    ref_forward = getattr(model, "forward", None)
    for base in model_new.__mro__[1:]:
        if base in (torch.nn.Module, object):
            continue
        if base is model or base.__name__ == "Model" or \
                _same_function(base.__dict__.get("forward"), ref_forward):
            return [Flag("modelnew_is_reference", f"ModelNew derives from `{base.__name__}`, the "
                         "reference: it would run the reference instead of its own code")]
    return []


def _same_function(a: Any, b: Any) -> bool:
    code_a, code_b = getattr(a, "__code__", None), getattr(b, "__code__", None)
    if not isinstance(code_a, types.CodeType) or not isinstance(code_b, types.CodeType):
        return False
    return _same_code(code_a, code_b)


def _same_code(a: types.CodeType, b: types.CodeType) -> bool:
    if a.co_code != b.co_code or a.co_names != b.co_names or len(a.co_consts) != len(b.co_consts):
        return False
    for x, y in zip(a.co_consts, b.co_consts, strict=True):
        if isinstance(x, types.CodeType) and isinstance(y, types.CodeType):
            if not _same_code(x, y):
                return False
        elif type(x) is not type(y) or x != y:
            return False
    return True


# -- outputs ----------------------------------------------------------------------------------

def check_outputs(outputs: Any, expected: Any) -> list[Flag]:
    """Outputs must mirror the reference's structure and be plain tensors with real storage of
    the right shape, dtype and device (no subclasses, meta, fake or lazy tensors)."""
    return list(_check(outputs, expected, "output"))


def _check(out: Any, exp: Any, path: str) -> Iterable[Flag]:
    if isinstance(exp, torch.Tensor):
        yield from _check_tensor(out, exp, path)
    elif isinstance(exp, tuple | list):
        if not isinstance(out, tuple | list) or len(out) != len(exp):
            got = f"{type(out).__name__} of {len(out)}" if isinstance(out, tuple | list) \
                else type(out).__name__
            yield Flag("output_structure", f"{path}: expected a {type(exp).__name__} of "
                       f"{len(exp)}, got {got}")
            return
        for i, (o, e) in enumerate(zip(out, exp, strict=True)):
            yield from _check(o, e, f"{path}[{i}]")
    elif isinstance(out, torch.Tensor) or type(out) is not type(exp):
        yield Flag("output_structure", f"{path}: expected {type(exp).__name__}, got "
                   f"{type(out).__name__}")


def _check_tensor(out: Any, exp: torch.Tensor, path: str) -> Iterable[Flag]:
    if not isinstance(out, torch.Tensor):
        yield Flag("output_structure", f"{path}: expected a tensor, got {type(out).__name__}")
        return
    if type(out) is not torch.Tensor:
        yield Flag("output_subclass", f"{path}: a {type(out).__qualname__}, not a plain "
                   "torch.Tensor (subclasses can compute lazily or fake their data)")
        return
    problem = _storage_problem(out)
    if problem:
        yield Flag("output_storage", f"{path}: {problem}")
        return
    if out.shape != exp.shape:
        yield Flag("output_shape", f"{path}: shape {tuple(out.shape)}, expected "
                   f"{tuple(exp.shape)}")
    if out.dtype != exp.dtype:
        yield Flag("output_dtype", f"{path}: dtype {out.dtype}, expected {exp.dtype}")
    if out.device != exp.device:
        yield Flag("output_device", f"{path}: on {out.device}, expected {exp.device}")
    if out.numel() and exp.numel() and \
            out.untyped_storage().data_ptr() == exp.untyped_storage().data_ptr():
        yield Flag("output_aliases_reference", f"{path}: shares memory with the reference's "
                   "output (the candidate found and returned the harness's tensor)")


def _storage_problem(t: torch.Tensor) -> str:
    if t.is_meta or t.device.type in ("meta", "lazy"):
        return f"a {t.device.type} tensor without data"
    if t.layout != torch.strided:
        return f"layout {t.layout}, expected strided"
    functorch = getattr(torch._C, "_functorch", None)
    if functorch is not None and functorch.is_functorch_wrapped_tensor(t):
        return "a functorch-wrapped tensor"
    try:
        ptr = t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError) as exc:
        return f"no real storage ({exc})"
    if t.numel() and ptr == 0:
        return "no real storage (null data pointer)"
    return ""
