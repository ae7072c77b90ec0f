"""Which floating dtypes the candidate's calls actually compute in (precision from what runs).

The precision a candidate is compared at used to come from its source text: ``A.half`` in a
branch that never runs (a first-call benchmark between an fp16 and an fp32 path that keeps
fp32) made the matched reference run under fp16 autocast, and an fp32 kernel as fast as the
reference read 0.25x. Instead, the worker watches the aten ops of correctness calls after the
first (a first call may autotune between methods) and reports the floating dtypes narrower
than the reference's outputs that reached an op.

It runs in the candidate's process: what it reports can only add a matched reference (the
headline is the lower of the matched and baseline speedups), never raise a speedup. Ops that
bypass the dispatcher (a custom CUDA kernel, Triton) are not seen: their precision is judged by
the tolerance alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

# the pseudo-setting in ``settings_changed`` that carries the observation to the parent
OBSERVED_KEY = "observed.reduced_float_dtypes"


class _Watch(TorchDispatchMode):  # type: ignore[no-untyped-call]
    def __init__(self, seen: set[torch.dtype]) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.seen = seen

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        for value in tree_flatten((args, kwargs, out))[0]:
            if isinstance(value, torch.Tensor) and value.is_floating_point():
                self.seen.add(value.dtype)
        return out


def watched(call: Callable[[], Any], seen: set[torch.dtype]) -> Any:
    """``call()`` with the floating dtypes of every aten op's tensors added to ``seen``."""
    with _Watch(seen):
        return call()


def watched_then_reset(call: Callable[[], Any], seen: set[torch.dtype]) -> Any:
    """``watched(call, seen)``, then dynamo's caches reset. Under a dispatch mode dynamo skips
    the frame of torch.compile'd code, and keeps skipping it: a compiled candidate was timed
    at eager speed (measured: 8 → 29 ms a call on a CPU; a corpus pair 6.5× → 0.98× on an
    H200). After the reset its next, unwatched call compiles it again (the untimed rounds pay
    that). The watch always runs: a compiled graph anywhere in the process must not switch
    it off (a dummy compile would hide eager fp16 work). No reset when dynamo was never handed
    a frame: on a GPU the first one imports Inductor's CUDA graph trees and Triton (2.4-3.5 s
    on an H200 host, ``benchmarks/child_startup.py``), which plain candidates never need."""
    import sys

    try:
        return watched(call, seen)
    finally:
        dynamo = sys.modules.get("torch._dynamo")
        if dynamo is not None and _dynamo_saw_frames():
            dynamo.reset()


def _dynamo_saw_frames() -> bool:
    """Has dynamo been handed any frame in this process (every frame it is handed is recorded
    before it decides to skip it)? True where this torch does not say: then always reset."""
    import sys

    convert = sys.modules.get("torch._dynamo.convert_frame")
    seen = getattr(getattr(convert, "input_codes", None), "seen", None)
    return seen is None or len(seen) > 0


def warm_up() -> None:
    """One watched op of our own on the CPU (a warm child, before any job; no device memory
    is needed): a dispatch mode's first use imports torch._dynamo and more (seconds), which a
    correctness trial would otherwise pay. That import makes Inductor's cache dir: the child's
    own tmp for now (the job's build dir takes over when the job comes,
    ``build_cache.prepare``). Raises what the import raised: a child whose torch is half
    imported must not serve a job."""
    import os
    import tempfile

    key, saved = "TORCHINDUCTOR_CACHE_DIR", os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    os.environ[key] = os.path.join(tempfile.gettempdir(), "warm-up-inductor")
    try:
        x = torch.ones(2)
        watched(lambda: x + x, set())
    finally:
        if saved is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = saved


def reduced(seen: set[torch.dtype], reference: list[str]) -> list[str]:
    """The dtypes in ``seen`` narrower than every floating dtype of the reference's outputs
    (``reference``: dtype names, e.g. ``["float32"]``), sorted by name."""
    widths = [_width(name) for name in reference]
    floor = min((w for w in widths if w), default=4)
    return sorted(str(d).removeprefix("torch.") for d in seen if d.itemsize < floor)


def _width(name: str) -> int:
    dtype = getattr(torch, name, None)
    return dtype.itemsize if isinstance(dtype, torch.dtype) and dtype.is_floating_point else 0
