"""A CUDA profiler pass: which kernels ran, and how much of the GPU time was the candidate's."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

from cudal1_evaluator.common.compare import clone_inputs
from cudal1_evaluator.schema import Flag
from cudal1_evaluator.verdict_details import ProfileSummary

Kernel = tuple[str, float, int]  # (name, total µs, count)

_GLOBAL = re.compile(r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?[\w:<>\s\*&]*?(\w+)\s*\(")
_TRITON = re.compile(r"@triton\.(?:jit|autotune)[\s\S]*?\bdef\s+(\w+)")
_NOT_FALLBACKS = (StopIteration, StopAsyncIteration, GeneratorExit)  # iteration's own flow


def own_kernel_names(source: str) -> set[str]:
    """Kernel names declared in the candidate's source (CUDA ``__global__``, Triton ``@jit``)."""
    return set(_GLOBAL.findall(source)) | set(_TRITON.findall(source))


def kernels_of(fn: Callable[[list[Any]], Any], inputs: list[Any], sync: Callable[[], None],
               calls: int = 3) -> list[Kernel]:
    """Kernels of ``calls`` calls, each on its own copy of ``inputs`` made before profiling."""
    from torch.profiler import ProfilerActivity, profile

    copies = [clone_inputs(inputs) for _ in range(calls)]
    sync()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for args in copies:
            fn(args)
            sync()
    totals: dict[str, list[float]] = {}
    for event in prof.events():
        if getattr(event.device_type, "name", "") != "CUDA":
            continue
        entry = totals.setdefault(event.name, [0.0, 0])
        entry[0] += float(event.time_range.elapsed_us())
        entry[1] += 1
    rows = [(name, round(t / calls, 3), int(c) // calls) for name, (t, c) in totals.items()]
    return sorted(rows, key=lambda row: -row[1])


def handled_exceptions(fn: Callable[[list[Any]], Any], inputs: list[Any], filename: str
                       ) -> list[str]:
    """Exceptions raised inside the candidate's own code (frames of ``filename``) during one
    call that the call survived: an ``except`` branch ran, e.g. a fallback after its kernel
    failed. Empty when the call itself raised. Runs untimed, under a trace function."""
    seen: dict[int, str] = {}  # per exception, the last (outermost) frame it reached

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "exception" and not issubclass(arg[0], _NOT_FALLBACKS):
            text = str(arg[1])
            message = f" ({text.splitlines()[0][:120]})" if text else ""
            seen[id(arg[1])] = f"{arg[0].__name__} at line {frame.f_lineno}{message}"
        return local

    def enter(frame: FrameType, event: str, arg: Any) -> Any:
        return local if frame.f_code.co_filename == filename else None

    args = clone_inputs(inputs)
    previous = sys.gettrace()
    sys.settrace(enter)
    try:
        fn(args)
    except Exception:
        return []
    finally:
        sys.settrace(previous)
    return list(dict.fromkeys(seen.values()))


def warm_up(device: str) -> None:
    """Start CUPTI and Kineto now with a throwaway session: about 2.5 s once per process on an
    H200, after which a profiler pass costs milliseconds. Only for a child that times nothing:
    once a session has run, each kernel launch costs about 1 µs more for the life of the
    process (``benchmarks/profiler_cost.py``), which would skew launch-bound timings."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    x = torch.ones(8, device=device)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
        torch.add(x, 1)
        torch.cuda.synchronize(device)


def _is_own(name: str, own: set[str]) -> bool:
    return name.startswith("triton") or any(n in name for n in own)


def summarize(reference: list[Kernel], candidate: list[Kernel], candidate_source: str,
              handled: list[str] | None = None) -> tuple[ProfileSummary, list[Flag]]:
    own = own_kernel_names(candidate_source)
    total = sum(k[1] for k in candidate)
    mine = sum(k[1] for k in candidate if _is_own(k[0], own))
    profile: ProfileSummary = {
        "kernels": [list(k) for k in candidate[:30]],
        "reference_kernels": [list(k) for k in reference[:30]],
        "candidate_gpu_us": round(total, 3),
        "reference_gpu_us": round(sum(k[1] for k in reference), 3),
        "candidate_kernel_share": round(mine / total, 4) if total > 0 else 0.0,
        "own_kernel_names": sorted(own),
    }
    flags: list[Flag] = []
    if not candidate and reference:
        flags.append(Flag("no_gpu_work", "the candidate launched no GPU kernels at all, while "
                          "the reference launches some (cached or precomputed results?)"))
    fallback = fallback_flag(reference, candidate, own, handled or [])
    if fallback is not None:
        profile["fallback_taken"] = fallback.severity == "reject"
        flags.append(fallback)
    return profile, flags


def fallback_flag(reference: list[Kernel], candidate: list[Kernel], own: set[str],
                  handled: list[str] | None = None) -> Flag | None:
    """A candidate that declares kernels of its own (CUDA ``__global__``, Triton) none of which
    ran took a fallback (rejected) when only the reference's kernels did the work, or when its
    call caught an exception in its own code (``handled``: the except branch ran); with other
    library kernels and no exception caught it is a PyTorch rewrite whose custom kernel is dead
    code (a warning). Candidates that declare no kernels (CUDA graphs, cuDNN/TF32 flags, plain
    PyTorch) may run exactly the reference's kernels honestly, so they are never judged here."""
    if not own or not candidate or any(_is_own(k[0], own) for k in candidate):
        return None
    declared = ", ".join(sorted(own)[:5])
    if {k[0] for k in candidate} <= {k[0] for k in reference}:
        return Flag("fallback_taken", f"the candidate's own kernels ({declared}) never ran: "
                    "the GPU time went to the reference's kernels only, so its fallback to "
                    "the reference's ops was taken")
    if handled:
        return Flag("fallback_taken", f"the candidate's own kernels ({declared}) never ran: "
                    f"its call caught {handled[0]} in its own code and an except branch "
                    "computed the result with library kernels instead (a silent fallback)")
    return Flag("custom_kernel_unused", f"the candidate's own kernels ({declared}) never ran; "
                "library kernels did the work (a PyTorch-level rewrite)", "warn")
