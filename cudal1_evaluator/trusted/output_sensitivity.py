"""How much a problem's output moves with its inputs: the measures behind the probe's
"degenerate" verdict (a problem whose output is constant rewards a candidate returning it)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

DEGENERATE_REL = 1e-6  # below this relative output change the problem rewards constants
PERTURBATION = 1e-3  # relative size of the noise added to floating inputs


def relative_change(a: Sequence[torch.Tensor], b: Sequence[torch.Tensor]) -> float:
    """‖a − b‖ / ‖a‖ over all outputs together (finite entries only), in float64."""
    diff = base = 0.0
    for x, y in zip(a, b, strict=True):
        if x.shape != y.shape:
            return math.inf  # shape depends on the inputs: certainly not constant
        xf, yf = x.double(), y.double()
        keep = torch.isfinite(xf) & torch.isfinite(yf)
        diff += float(torch.linalg.vector_norm(torch.where(keep, xf - yf, 0.0)) ** 2)
        base += float(torch.linalg.vector_norm(torch.where(keep, xf, 0.0)) ** 2)
    if base == 0.0:
        return 0.0 if diff == 0.0 else math.inf
    return math.sqrt(diff / base)


def perturbed(inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    gen = torch.Generator(device=inputs[0].device).manual_seed(12345)
    out = []
    for t in inputs:
        if t.is_floating_point() and t.numel():
            scale = float(t.abs().mean()) or 1.0
            noise = torch.randn(t.shape, generator=gen, device=t.device, dtype=t.dtype)
            out.append(t + PERTURBATION * scale * noise)
        else:
            out.append(t)
    return out


def equal_tensors(a: Sequence[torch.Tensor], b: Sequence[torch.Tensor]) -> bool:
    return all(x.shape == y.shape and torch.equal(x, y) for x, y in zip(a, b, strict=True))


_CONSTANT_EXAMPLES = {
    1.0: " (softmax then sum over the same axis is always 1)",
    0.0: " (e.g. x - x, or the mean of a tensor just normalised to zero mean)",
}


def degenerate_message(out: list[torch.Tensor], seeds_change: float, perturbation: float,
                        seeds: int) -> str:
    flat = torch.cat([t.double().flatten() for t in out]) if out else torch.zeros(0)
    finite = flat[torch.isfinite(flat)]
    constant = ""
    if finite.numel() and float(finite.max() - finite.min()) <= 1e-5 * max(
            1.0, float(finite.abs().max())):
        value = float(finite.mean())
        example = _CONSTANT_EXAMPLES.get(round(value, 4), "")
        constant = f" Every output element is {value:.6g} whatever the input{example}."
    return (f"the output barely depends on the inputs: relative change {seeds_change:.1e} "
            f"across {seeds} seeds and {perturbation:.1e} under a small perturbation "
            f"(threshold {DEGENERATE_REL:.0e}).{constant} A candidate returning a constant would "
            "pass verification, so this problem rewards cheating: make the output depend on "
            "the inputs.")
