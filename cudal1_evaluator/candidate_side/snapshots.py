"""Snapshots of what a candidate could tamper with: library functions and global torch settings.

Globals: the identity of every function, class and descriptor in the namespaces the harness
relies on (torch, torch.nn.functional, torch.Tensor, nn modules, torch.cuda, the clocks,
builtins, os, random, threading), plus the code object of each Python function, so a
monkeypatch (``torch.matmul = slow``, ``time.perf_counter = fake``, ``f.__code__ = ...``) shows as
a changed identity. Names that appear later (lazily imported submodules) are not findings.
"""

from __future__ import annotations

import _thread
import builtins
import math
import os
import random
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
import torch.utils._device

from cudal1_evaluator.candidate_side import native_state
from cudal1_evaluator.schema import Flag
from cudal1_evaluator.verdict_details import SettingsChanged, SettingValue

_DATA = (int, float, str, bytes, bool, type(None), tuple, frozenset, torch.dtype)


@dataclass
class GlobalsSnapshot:
    ids: dict[str, int] = field(default_factory=dict)
    objects: dict[str, object] = field(default_factory=dict, repr=False)
    classes: set[str] = field(default_factory=set)  # namespaces that are classes
    values: dict[str, object] = field(default_factory=dict)  # the problem module's constants
    native: native_state.NativeState | None = None


@dataclass
class SettingsSnapshot:
    values: dict[str, object] = field(default_factory=dict)


def _namespaces(problems: list[tuple[str, Any]]) -> Iterator[tuple[str, Any]]:
    yield from (("torch", torch), ("torch.nn.functional", F), ("torch.Tensor", torch.Tensor),
                ("torch._C.TensorBase", torch._C.TensorBase), ("torch.nn.Module", torch.nn.Module),
                ("torch.nn.init", torch.nn.init), ("torch.linalg", torch.linalg),
                ("torch.fft", torch.fft), ("torch.special", torch.special),
                ("torch._C._nn", torch._C._nn),
                ("torch._C._VariableFunctions", torch._C._VariableFunctions),
                ("torch.testing", torch.testing), ("torch.random", torch.random),
                ("torch.autograd.grad_mode", torch.autograd.grad_mode),
                ("torch.cuda", torch.cuda), ("torch.cuda.Event", torch.cuda.Event),
                ("torch.cuda.Stream", torch.cuda.Stream), ("time", time), ("builtins", builtins),
                ("os", os), ("random", random), ("math", math), ("threading", threading),
                ("_thread", _thread), ("sys", sys),
                # the harness makes CUDA inputs under a DeviceContext
                ("torch.utils._device", torch.utils._device),
                ("torch.utils._device.DeviceContext", torch.utils._device.DeviceContext))
    for name in dir(torch.nn):
        cls = getattr(torch.nn, name, None)
        if isinstance(cls, type) and issubclass(cls, torch.nn.Module):
            yield f"torch.nn.{name}", cls
    for name, module in _harness_modules() + problems:
        yield name, module
        for value in list(vars(module).values()):
            if isinstance(value, type) and value.__module__ == name:
                yield f"{name}.{value.__qualname__}", value


def _harness_modules() -> list[tuple[str, Any]]:
    """The evaluator itself (a candidate that patches ``common.compare.compare_outputs`` or
    ``Guard.findings`` shows up like a torch patch)."""
    return [(name, m) for name, m in list(sys.modules.items())
            if m is not None
            and (name == "cudal1_evaluator" or name.startswith("cudal1_evaluator."))]


# The problem module as the harness names it; tests and other loaders add theirs.
PROBLEM_MODULE_NAMES: set[str] = {"cudal1_reference_problem"}


def watch_problem_module(name: str) -> None:
    """Treat ``sys.modules[name]`` as a problem module: its constants, functions and classes
    belong to the problem, and a candidate may not change them."""
    PROBLEM_MODULE_NAMES.add(name)


def _problem_modules() -> list[tuple[str, Any]]:
    """The problem module(s), by identity (the names the harness loads them under), never by
    where files lie: a virtual environment under /tmp holds libraries, not problems."""
    return [(name, sys.modules[name]) for name in sorted(PROBLEM_MODULE_NAMES)
            if sys.modules.get(name) is not None]


def _constant(value: Any) -> bool:
    if isinstance(value, tuple):
        return all(_constant(v) for v in value)
    return isinstance(value, int | float | str | bool | torch.dtype) or value is None


# Hooks that tools (pytest, faulthandler, IPython) swap for good reasons.
_UNWATCHED = frozenset({"sys.excepthook", "sys.displayhook", "sys.breakpointhook",
                        "sys.unraisablehook", "threading.excepthook", "builtins._"})


def _watched(value: Any) -> bool:
    return not isinstance(value, _DATA) and (
        callable(value) or isinstance(value, property | classmethod | staticmethod | type
                                      | types.ModuleType | types.GetSetDescriptorType))


def _code_of(value: Any) -> types.CodeType | None:
    if not isinstance(value, types.FunctionType | types.MethodType):
        return None  # only Python functions have code to swap; never poke other objects
    code = getattr(value, "__code__", None)
    return code if isinstance(code, types.CodeType) else None


def snapshot_globals() -> GlobalsSnapshot:
    ids: dict[str, int] = {}
    objects: dict[str, object] = {}
    classes: set[str] = set()
    problems = _problem_modules()
    for prefix, namespace in _namespaces(problems):
        if isinstance(namespace, type):
            classes.add(prefix)
        try:
            items = list(vars(namespace).items())
        except TypeError:
            continue
        for name, value in items:
            key = f"{prefix}.{name}"
            if not _watched(value) or key in _UNWATCHED:
                continue
            ids[key], objects[key] = id(value), value
            code = _code_of(value)
            if code is not None:
                ids[f"{key}.__code__"], objects[f"{key}.__code__"] = id(code), code
    values = {f"{name}.{k}": v for name, module in problems
              for k, v in list(vars(module).items()) if not k.startswith("__") and _constant(v)}
    for _, module in problems:
        _watch_ops_of(module)
    return GlobalsSnapshot(ids, objects, classes, values, native_state.snapshot())


_SCANNED: set[str] = set()


def _watch_ops_of(problem: Any) -> None:
    """The aten ops a problem's source names join the watched dispatcher entries (once)."""
    path = getattr(problem, "__file__", None)
    if not isinstance(path, str) or path in _SCANNED:
        return
    _SCANNED.add(path)
    try:
        native_state.watch_ops_in_source(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return


def diff_globals(before: GlobalsSnapshot, after: GlobalsSnapshot) -> list[Flag]:
    flags = []
    for key, ident in before.ids.items():
        now = after.ids.get(key)
        if now == ident or _torch_wrapper(after.objects.get(key), before.objects.get(key)):
            continue
        owner = key.removesuffix(".__code__")
        if owner != key and after.ids.get(owner) != before.ids.get(owner):
            continue  # the function itself was replaced: judged under its own name
        name = key.removesuffix(".__code__")
        how = "was deleted" if now is None else (
            "had its code replaced" if key.endswith(".__code__") else "was replaced")
        flags.append(Flag(f"patched_{name}", f"`{name}` {how} after the candidate ran: "
                          "monkeypatching changes what the reference or the clock does"))
    for key, value in before.values.items():
        constant = after.values.get(key, _MISSING)
        if not same_constant(constant, value):
            flags.append(Flag(f"patched_{key}", f"`{key}` changed from {value!r} to {constant!r}: "
                              "the problem's constants are not the candidate's to change"))
    flags += native_state.diff(before.native, after.native)
    for key in after.ids.keys() - before.ids.keys():
        owner, _, name = key.rpartition(".")
        if owner in before.classes and not key.endswith(".__code__"):
            flags.append(Flag(f"patched_{key}", f"`{key}` was added after the candidate ran: it "
                              "overrides an inherited method (monkeypatching)"))
    return _one_per_name(flags)


_MISSING = "<deleted or replaced>"


def same_constant(a: Any, b: Any) -> bool:
    """Equal constants, where NaN equals NaN (``float("nan") != float("nan")``)."""
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(same_constant(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and bool(a == b)


def _torch_wrapper(new: Any, old: Any) -> bool:
    """torch's own wrappers around what was there (dynamo wraps ``torch.manual_seed`` and
    ``nn.Module.__init__`` on first use): code inside torch that holds on to the old object."""
    if new is None or old is None:
        return False
    if isinstance(new, types.CodeType):
        return False  # a replaced code object is never torch's doing
    code = _code_of(new)
    if code is None or not _in_torch(code.co_filename):
        return False
    if getattr(new, "__wrapped__", None) is old:
        return True
    cells = getattr(new, "__closure__", None) or ()
    return any(_cell_value(c) is old for c in cells)


def _cell_value(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell
        return None


def _in_torch(filename: str) -> bool:
    return os.path.realpath(filename).startswith(_TORCH_DIR)


_TORCH_DIR = os.path.realpath(os.path.dirname(torch.__file__)) + os.sep


def _one_per_name(flags: list[Flag]) -> list[Flag]:
    seen: dict[str, Flag] = {}
    for flag in flags:
        seen.setdefault(flag.code, flag)
    return list(seen.values())


# -- settings -------------------------------------------------------------------------------

Getter = Callable[[], Any]
Setter = Callable[[Any], None]


def _attr(obj: Any, name: str) -> tuple[Getter, Setter] | None:
    if obj is None or not hasattr(obj, name):
        return None
    return (lambda: getattr(obj, name)), (lambda v: setattr(obj, name, v))


def _set_grad_enabled(value: Any) -> None:
    torch.set_grad_enabled(bool(value))


def _settings() -> dict[str, tuple[Getter, Setter]]:
    """name -> (get, set), legacy switches before the newer fp32_precision API (restore order)."""
    b = torch.backends
    table: dict[str, tuple[Getter, Setter] | None] = {
        "float32_matmul_precision": (torch.get_float32_matmul_precision,
                                     torch.set_float32_matmul_precision),
        "cudnn.benchmark": _attr(b.cudnn, "benchmark"),
        "cudnn.deterministic": _attr(b.cudnn, "deterministic"),
        "cudnn.allow_tf32": _attr(b.cudnn, "allow_tf32"),
        "cudnn.enabled": _attr(b.cudnn, "enabled"),
        "cuda.matmul.allow_tf32": _attr(b.cuda.matmul, "allow_tf32"),
        "cuda.matmul.allow_fp16_reduced_precision_reduction":
            _attr(b.cuda.matmul, "allow_fp16_reduced_precision_reduction"),
        "cuda.matmul.allow_bf16_reduced_precision_reduction":
            _attr(b.cuda.matmul, "allow_bf16_reduced_precision_reduction"),
        "fp32_precision": _attr(b, "fp32_precision"),
        "cuda.matmul.fp32_precision": _attr(b.cuda.matmul, "fp32_precision"),
        "cudnn.fp32_precision": _attr(b.cudnn, "fp32_precision"),
        "cudnn.conv.fp32_precision": _attr(getattr(b.cudnn, "conv", None), "fp32_precision"),
        "cudnn.rnn.fp32_precision": _attr(getattr(b.cudnn, "rnn", None), "fp32_precision"),
        "mkldnn.enabled": _attr(b.mkldnn, "enabled"),
        "mkldnn.fp32_precision": _attr(b.mkldnn, "fp32_precision"),
        "mkldnn.matmul.fp32_precision": _attr(getattr(b.mkldnn, "matmul", None),
                                              "fp32_precision"),
        "mkldnn.conv.fp32_precision": _attr(getattr(b.mkldnn, "conv", None), "fp32_precision"),
        "mkldnn.rnn.fp32_precision": _attr(getattr(b.mkldnn, "rnn", None), "fp32_precision"),
        "deterministic_algorithms": (
            lambda: (torch.are_deterministic_algorithms_enabled(),
                     torch.is_deterministic_algorithms_warn_only_enabled()),
            lambda v: torch.use_deterministic_algorithms(v[0], warn_only=v[1])),
        "num_threads": (torch.get_num_threads, torch.set_num_threads),
        "grad_enabled": (torch.is_grad_enabled, _set_grad_enabled),
        "default_dtype": (torch.get_default_dtype, torch.set_default_dtype),
    }
    if hasattr(torch, "get_default_device"):
        table["default_device"] = (torch.get_default_device, torch.set_default_device)
    return {k: v for k, v in table.items() if v is not None}


_TABLE: dict[str, tuple[Getter, Setter]] | None = None


def _table() -> dict[str, tuple[Getter, Setter]]:
    global _TABLE
    if _TABLE is None:
        _TABLE = _settings()
    return _TABLE


UNREADABLE = "<unreadable>"


def _read(get: Getter) -> Any:
    try:
        return get()
    except Exception:  # torch refuses to read TF32 state after legacy and new APIs were mixed
        return UNREADABLE


def snapshot_settings() -> SettingsSnapshot:
    return SettingsSnapshot({name: _read(get) for name, (get, _) in _table().items()})


def _jsonable(value: object) -> SettingValue:
    if isinstance(value, bool | int | float | str) or value is None:
        return value
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    return str(value)


def diff_settings(before: SettingsSnapshot, after: SettingsSnapshot) -> SettingsChanged:
    return {name: {"before": _jsonable(old), "after": _jsonable(after.values.get(name))}
            for name, old in before.values.items() if after.values.get(name) != old}


def restore_settings(snapshot: SettingsSnapshot) -> None:
    """Put every setting back; the legacy and fp32_precision switches are views of one state,
    so a second pass settles any that the first pass's later writes moved."""
    table = _table()
    for _ in range(3):
        changed = False
        for name, value in snapshot.values.items():
            get, put = table[name]
            if value == UNREADABLE or _read(get) == value:
                continue
            try:
                put(value)
                changed = True
            except Exception:  # e.g. a setting this build refuses; reported by diff_settings
                continue
        if not changed:
            return


# set by the harness around every call (all run under no_grad), never by a settings restore
HARNESS_SET = frozenset({"grad_enabled"})


def restore_call_settings(snapshot: SettingsSnapshot) -> None:
    """``restore_settings`` for the settings a call runs under, grad mode left to the caller.
    A snapshot taken outside ``no_grad`` would turn autograd on inside it: the candidate's
    correctness calls then recorded graphs, so TorchScript specialised on parameters that
    require grad and never fused, and CUDA graph trees kept outputs alive for a backward."""
    restore_settings(SettingsSnapshot({k: v for k, v in snapshot.values.items()
                                       if k not in HARNESS_SET}))


def current_stream() -> Any:
    """The current CUDA stream if CUDA is already initialised (never initialises it)."""
    if not torch.cuda.is_available() or not torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
        return None
    return torch.cuda.current_stream()
