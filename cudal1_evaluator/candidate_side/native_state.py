"""Snapshots of process state that Python object identities do not show.

A candidate can change what the harness and the reference compute without replacing a single
Python object: register its own kernel for an aten op (``torch.library`` from Python,
``TORCH_LIBRARY_IMPL`` from a ``load_inline`` source), push a torch function/dispatch mode,
add a global module hook, leave autocast on, install a signal handler or an interval timer,
pin the process to one core or lower its priority. Each shows here as a changed value, and a
change is a reject finding with a message a user understands. Native threads that appear are
only reported (torch's own thread pools start lazily). ``candidate_side.snapshots`` carries this
state in ``GlobalsSnapshot.native``.
"""

from __future__ import annotations

import os
import re
import signal
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import torch
import torch.nn.modules.module as nn_module

from cudal1_evaluator.schema import Flag

# ops the harness itself runs (inputs, copies, poisoning) and the most common reference ops;
# every overload of each is watched. ``watch_ops`` adds the ops a reference really uses.
WATCHED_OPS: set[str] = {
    "clone", "copy_", "empty", "empty_like", "empty_strided", "normal_", "uniform_", "zero_",
    "zeros", "zeros_like", "fill_", "randn", "rand", "randint", "random_", "set_", "_to_copy",
    "to", "contiguous", "add", "sub", "mul", "div", "mm", "addmm", "bmm", "matmul", "relu",
    "tanh", "sigmoid", "exp", "softmax", "_softmax", "log_softmax", "convolution", "conv2d",
    "linear", "sum", "mean", "amax", "max", "abs", "isnan", "isfinite", "eq", "ne", "allclose",
    "isclose", "sort", "cat", "stack", "gelu", "layer_norm", "native_layer_norm", "bernoulli_",
}
_HOOKS = ("_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks",
          "_global_backward_pre_hooks", "_global_module_registration_hooks",
          "_global_parameter_registration_hooks", "_global_buffer_registration_hooks")
_TIMERS = {"ITIMER_REAL": signal.ITIMER_REAL, "ITIMER_VIRTUAL": signal.ITIMER_VIRTUAL,
           "ITIMER_PROF": signal.ITIMER_PROF}
_KERNEL_LINE = re.compile(r"^(\w+): (.*)$")
T = TypeVar("T")


@dataclass(frozen=True)
class NativeState:
    """One snapshot; a part that could not be read is empty (or None)."""

    dispatcher: dict[str, dict[str, str]]  # op -> dispatch key -> kernel
    modes: tuple[int, int] | None  # torch function / dispatch mode stack depths
    hooks: dict[str, int]  # global module hook dict -> how many hooks
    autocast: dict[str, tuple[bool, str]]  # device -> (enabled, dtype)
    signals: dict[str, str]  # signal -> handler
    timers: dict[str, bool]  # interval timer -> armed
    affinity: list[int] | None
    niceness: int | None
    threads: list[str]  # the process's native threads by name (``comm``)


def watch_ops(names: Iterable[str]) -> None:
    """Watch these ops too (``aten::mm`` or ``mm``), e.g. the ops the reference dispatched."""
    WATCHED_OPS.update(n.removeprefix("aten::").split(".")[0] for n in names)


def watch_ops_in_source(source: str) -> None:
    """The ``torch.x``/``F.x``/``.x(`` names in a problem's source that are aten ops."""
    names = set(re.findall(r"\b(?:torch|F|nn\.functional)\.(\w+)\s*\(", source))
    names |= set(re.findall(r"\.(\w+)\s*\(", source))
    known = {n.removeprefix("aten::").split(".")[0] for n in _all_aten_ops()}
    WATCHED_OPS.update(names & known)


def _all_aten_ops() -> list[str]:
    return [n for n in torch._C._dispatch_get_all_op_names() if n.startswith("aten::")]


def _kernels(name: str) -> dict[str, str]:
    try:
        table = torch._C._dispatch_dump_table(name)
    except RuntimeError:
        return {}
    return {m.group(1): m.group(2) for line in table.splitlines()
            if (m := _KERNEL_LINE.match(line))}


def _dispatcher() -> dict[str, dict[str, str]]:
    watched = WATCHED_OPS
    return {name: _kernels(name) for name in _all_aten_ops()
            if name[6:].split(".")[0] in watched}


def _autocast() -> dict[str, tuple[bool, str]]:
    state: dict[str, tuple[bool, str]] = {}
    for device in ("cpu", "cuda"):
        try:
            state[device] = (torch.is_autocast_enabled(device),
                             str(torch.get_autocast_dtype(device)))
        except (RuntimeError, TypeError):
            continue
    return state


def _signals() -> dict[str, str]:
    handlers = {}
    for sig in signal.valid_signals():
        try:
            handler = signal.getsignal(sig)
        except (ValueError, OSError):
            continue
        handlers[signal.Signals(sig).name if sig in signal.Signals._value2member_map_
                 else str(sig)] = _handler_name(handler)
    return handlers


def _handler_name(handler: Any) -> str:
    if handler in (signal.SIG_DFL, signal.SIG_IGN, None):
        return str(handler)
    return f"{getattr(handler, '__module__', '?')}.{getattr(handler, '__qualname__', handler)}"


def _timers() -> dict[str, bool]:
    return {name: any(v > 0 for v in signal.getitimer(which)) for name, which in _TIMERS.items()}


def _native_threads() -> list[str]:
    names = []
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return []
    for tid in tasks:
        try:
            names.append(Path(f"/proc/self/task/{tid}/comm").read_text().strip())
        except OSError:  # the thread ended meanwhile
            continue
    return names


def _read(get: Callable[[], T]) -> T | None:
    try:
        return get()
    except (OSError, RuntimeError, AttributeError):
        return None


def snapshot() -> NativeState:
    return NativeState(
        dispatcher=_read(_dispatcher) or {},
        modes=_read(lambda: (torch._C._len_torch_function_stack(),
                             torch._C._len_torch_dispatch_stack())),
        hooks={name: len(getattr(nn_module, name, {})) for name in _HOOKS},
        autocast=_read(_autocast) or {},
        signals=_read(_signals) or {},
        timers=_read(_timers) or {},
        affinity=_read(lambda: sorted(os.sched_getaffinity(0))),
        niceness=_read(lambda: os.getpriority(os.PRIO_PROCESS, 0)),
        threads=_native_threads(),
    )


def diff(before: NativeState | None, after: NativeState | None) -> list[Flag]:
    """What changed between two snapshots, as findings (empty when either is missing)."""
    if before is None or after is None:
        return []
    return [*_dispatcher_flags(before.dispatcher, after.dispatcher),
            *_simple_flags(before, after), *_signal_flags(before, after)]


def _dispatcher_flags(before: dict[str, dict[str, str]], after: dict[str, dict[str, str]]
                      ) -> list[Flag]:
    found = []
    for op, kernels in before.items():
        now = after.get(op, {})
        changed = sorted(k for k in kernels.keys() | now.keys() if kernels.get(k) != now.get(k))
        if changed:
            where = now.get(changed[0], "removed").split(" [")[0]
            found.append(f"{op} ({', '.join(changed[:4])}; {where})")
    if not found:
        return []
    more = f" and {len(found) - 1} more" if len(found) > 1 else ""
    return [Flag("dispatcher_override", f"the candidate registered its own kernel for "
                 f"{found[0]}{more}: it changes what the harness and the reference compute")]


def _simple_flags(before: NativeState, after: NativeState) -> list[Flag]:
    flags = []
    if before.modes != after.modes:
        flags.append(Flag("torch_mode_stack", "the candidate left a torch function or dispatch "
                          f"mode active (stack depths {before.modes} -> {after.modes}): "
                          "it intercepts every op the harness runs"))
    hooks = [k.removeprefix("_global_") for k in before.hooks
             if after.hooks.get(k) != before.hooks[k]]
    if hooks:
        flags.append(Flag("global_module_hook", "the candidate registered global module hooks "
                          f"({', '.join(hooks)}): they can rewrite the reference's outputs"))
    turned = [f"{dev} ({after.autocast[dev][1]})" for dev in before.autocast
              if after.autocast.get(dev) != before.autocast[dev]
              and after.autocast.get(dev, (False, ""))[0]]
    if turned:
        flags.append(Flag("autocast_enabled", f"the candidate left autocast on for "
                          f"{', '.join(turned)}: the reference would run in lower precision"))
    for old, new, code, what in (
            (before.affinity, after.affinity, "cpu_affinity", "pinned the process to other CPUs"),
            (before.niceness, after.niceness, "niceness", "changed the process's priority")):
        if old != new:
            flags.append(Flag(code, f"the candidate {what} ({old} -> {new}): "
                              "it changes how fast the reference runs"))
    started = Counter(after.threads) - Counter(before.threads)
    if started:
        names = ", ".join(f"{name} x{n}" if n > 1 else name
                          for name, n in sorted(started.items()))
        flags.append(Flag("native_threads", f"{started.total()} native thread(s) appeared "
                          f"({names}; torch's pools start lazily; candidate threads may work "
                          "outside the timer)", "info"))
    return flags


def _signal_flags(before: NativeState, after: NativeState) -> list[Flag]:
    flags = []
    changed = sorted(k for k, v in after.signals.items() if before.signals.get(k) != v)
    if changed:
        flags.append(Flag("signal_handler", f"the candidate installed signal handlers for "
                          f"{', '.join(changed[:5])}: they can interrupt the harness"))
    armed = sorted(k for k, v in after.timers.items() if v and not before.timers.get(k))
    if armed:
        flags.append(Flag("itimer", f"the candidate armed interval timers ({', '.join(armed)}): "
                          "they interrupt the reference at chosen moments"))
    return flags
