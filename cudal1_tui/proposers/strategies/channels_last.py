"""channels_last memory format for convolution problems (weights and 4-D/5-D inputs)."""

from __future__ import annotations

import re

from cudal1_tui.analysis.source_tree import parse_python, text
from cudal1_tui.proposers.source_surgery import (
    REF_FORWARD,
    REF_INIT,
    render_call_args,
    render_params,
    wrap_reference,
)
from cudal1_tui.proposers.strategies.base import BuiltinCandidate, Context

_CONV = re.compile(r"^(Conv(Transpose)?([23])d|conv(_transpose)?([23])d)$")

HELPERS = '''
def _to_channels_last(value):
    if isinstance(value, torch.Tensor) and value.dim() == 4:
        return value.contiguous(memory_format=torch.channels_last)
    if isinstance(value, torch.Tensor) and value.dim() == 5:
        return value.contiguous(memory_format=torch.channels_last_3d)
    return value


def _to_contiguous(out):
    if isinstance(out, torch.Tensor):
        return out.contiguous()
    if isinstance(out, (tuple, list)):
        return type(out)(_to_contiguous(o) for o in out)
    return out
'''


def conv_dims(source: str) -> set[int]:
    """Spatial ranks (2, 3) of the convolutions the module uses, found with tree-sitter."""
    dims: set[int] = set()
    stack = [parse_python(source).root_node]
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        if node.type == "identifier":
            match = _CONV.match(text(node))
            if match:
                dims.add(int(match.group(3) or match.group(5)))
    return dims


def _methods(ctx: Context, dims: set[int]) -> str:
    fmt = "torch.channels_last_3d" if dims == {3} else "torch.channels_last"
    convert = "\n".join(
        f"    {p.name} = _to_channels_last({p.name})"
        for p in ctx.forward.params if p.kind in ("positional", "keyword_only")
    )
    return f'''
def __init__({render_params(ctx.init)}):
    self.{REF_INIT}({render_call_args(ctx.init)})
    self.to(memory_format={fmt})

def forward({render_params(ctx.forward)}):
    """The reference computation with weights and activations in channels_last."""
{convert or "    pass"}
    return _to_contiguous(self.{REF_FORWARD}({render_call_args(ctx.forward)}))
'''


def candidates(ctx: Context) -> list[BuiltinCandidate]:
    dims = conv_dims(ctx.problem_source)
    if not dims:
        return []
    code = wrap_reference(ctx.problem_source, "Built-in candidate: channels_last memory format.",
                          HELPERS, _methods(ctx, dims))
    ranks = ", ".join(f"{d}-D" for d in sorted(dims))
    return [BuiltinCandidate(
        "channels-last", code, f"convolution weights and inputs in channels_last ({ranks} conv)")]
