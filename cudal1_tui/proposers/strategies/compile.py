"""torch.compile of the reference forward, in the modes worth trying first."""

from __future__ import annotations

import shutil

from cudal1_tui.proposers.source_surgery import (
    CLONE_OUTPUTS,
    REF_FORWARD,
    REF_INIT,
    render_call_args,
    render_params,
    wrap_reference,
)
from cudal1_tui.proposers.strategies.base import BuiltinCandidate, Context

CUDA_MODES = ("default", "reduce-overhead", "max-autotune-no-cudagraphs")
CPU_MODES = ("default",)  # the others tune GPU kernels or capture CUDA graphs
CPU_NOTE = "inductor on CPU generates C++ and needs a host C++ compiler (g++ or clang++)"


def has_cxx() -> bool:
    return any(shutil.which(c) for c in ("c++", "g++", "clang++"))


def _methods(ctx: Context, mode: str) -> str:
    mode_arg = "" if mode == "default" else f', mode="{mode}"'
    call = f"self._compiled_forward({render_call_args(ctx.forward)})"
    # reduce-overhead replays CUDA graphs whose outputs live in graph-owned memory that the
    # next call overwrites: each output is cloned so a tensor handed out stays valid.
    result = f"_clone_outputs({call})" if mode == "reduce-overhead" else call
    return f'''
def __init__({render_params(ctx.init)}):
    self.{REF_INIT}({render_call_args(ctx.init)})
    self._compiled_forward = torch.compile(self.{REF_FORWARD}{mode_arg})

def forward({render_params(ctx.forward)}):
    """The reference computation, compiled with torch.compile (mode {mode})."""
    return {result}
'''


def candidates(ctx: Context) -> list[BuiltinCandidate]:
    modes = CUDA_MODES if ctx.on_cuda else CPU_MODES
    out = []
    for mode in modes:
        requires: tuple[str, ...] = () if ctx.on_cuda else ("c++ compiler",)
        description = f"torch.compile(mode={mode!r}) of the reference forward"
        if not ctx.on_cuda:
            description += f"; {CPU_NOTE}" + ("" if has_cxx() else " (none found on PATH)")
        helpers = CLONE_OUTPUTS if mode == "reduce-overhead" else ""
        header = f"Built-in candidate: torch.compile, mode {mode}."
        code = wrap_reference(ctx.problem_source, header, helpers, _methods(ctx, mode))
        out.append(BuiltinCandidate(f"torch-compile-{mode}", code, description, requires))
    return out
