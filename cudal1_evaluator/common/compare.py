"""Output comparison with named tolerance presets, input cloning and memory poisoning."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import torch

from cudal1_evaluator.verdict_details import ToleranceInfo

_FLOAT_MAX = sys.float_info.max

PRESETS: dict[str, dict[str, float]] = {
    # KernelBench: fp32 1e-4, half types 1e-2
    "strict": {"float64": 1e-4, "float32": 1e-4, "float16": 1e-2, "bfloat16": 1e-2},
    # CUDA-L1's harness: 1e-2 for everything
    "relaxed": {"float64": 1e-2, "float32": 1e-2, "float16": 1e-2, "bfloat16": 1e-2},
}


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def tolerance_for(preset: str, dtype: torch.dtype) -> float:
    """atol = rtol for a floating dtype; 0 (exact) for integers and bools."""
    if not (dtype.is_floating_point or dtype.is_complex):
        return 0.0
    if dtype.is_complex:  # each part as its real dtype
        dtype = dtype.to_real()
    table = PRESETS[preset]
    return table.get(dtype_name(dtype), max(table.values()))


def describe_tolerance(preset: str) -> ToleranceInfo:
    return {
        "preset": preset,
        "rule": "|got - exp| <= tol * max|exp| + tol * |exp| elementwise, per output tensor "
                "(atol scaled to the reference's magnitude)",
        "by_dtype": {name: {"atol": tol, "rtol": tol, "atol_scaled_by": "max|exp|"}
                     for name, tol in PRESETS[preset].items()},
        "integers": "exact",
        "nan_inf": "positions must match",
        "judged_against": "the strict fp32 reference output",
    }


@dataclass
class Comparison:
    ok: bool
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    message: str = ""


def as_tensors(value: Any) -> list[Any] | None:
    """A tensor or a tuple/list of tensors, flattened; None for anything else."""
    items = list(value) if isinstance(value, (tuple, list)) else [value]
    return items if all(isinstance(t, torch.Tensor) for t in items) else None


def _finite(x: float) -> float:
    return min(x, _FLOAT_MAX) if x == x else _FLOAT_MAX


def _compare_one(exp: torch.Tensor, got: torch.Tensor, preset: str, idx: int,
                 floor: float = 0.0) -> Comparison:
    where = f"output {idx}"
    if type(got) is not torch.Tensor:
        return Comparison(False, message=f"{where} is a {type(got).__name__}, not a torch.Tensor")
    if got.shape != exp.shape:
        return Comparison(False, message=f"{where}: shape {tuple(got.shape)} != {tuple(exp.shape)}")
    if got.dtype != exp.dtype:
        return Comparison(False, message=dtype_message(where, got.dtype, exp.dtype))
    if got.device != exp.device:
        return Comparison(False, message=f"{where}: device {got.device} != {exp.device}")
    if exp.numel() == 0:
        return Comparison(True)
    if exp.is_complex():  # real and imaginary parts, each under its real dtype's tolerance
        return _compare_one(torch.view_as_real(exp.detach()), torch.view_as_real(got.detach()),
                            preset, idx, floor)
    tol = tolerance_for(preset, exp.dtype)
    tol = max(tol, floor) if tol else tol
    # float32 arithmetic for float32 and narrower (its rounding, ~6e-8 relative, is far
    # below any tolerance): half the memory traffic of float64 on large outputs
    wide = torch.float64 if exp.dtype == torch.float64 else torch.float32
    e = exp.detach().to(wide) if exp.is_floating_point() else exp.detach()
    g = got.detach().to(wide) if got.is_floating_point() else got.detach()
    if not exp.is_floating_point():
        return _exactly(e, g, where)
    short = judge_finite_rows(e.reshape(1, -1), g.reshape(1, -1), tol)
    if short is not None and short[0][0]:  # a failure is judged in full, for its message
        return Comparison(True, short[0][1], short[0][2])
    e_fin, g_fin = torch.isfinite(e), torch.isfinite(g)
    if not torch.equal(e_fin, g_fin):
        return Comparison(False, _FLOAT_MAX, _FLOAT_MAX, f"{where}: NaN/Inf positions differ")
    all_finite = bool(e_fin.all())
    if not all_finite and not torch.equal(torch.nan_to_num(e[~e_fin], nan=0.5),
                                          torch.nan_to_num(g[~g_fin], nan=0.5)):
        return Comparison(False, _FLOAT_MAX, _FLOAT_MAX, f"{where}: NaN/Inf positions differ")
    if not all_finite:  # only the finite values are compared (masks, not copies)
        e, g = torch.where(e_fin, e, 0.0), torch.where(e_fin, g, 0.0)
    diff = (e - g).abs_()
    magnitude = e.abs()
    rel = diff / magnitude.clamp_min(1e-12)
    max_abs, max_rel = _finite(float(diff.max())), _finite(float(rel.max()))
    atol = tol * float(magnitude.max())  # scaled: a fixed atol would dominate tiny outputs
    bad = diff > atol + tol * magnitude
    n_bad = int(bad.sum())
    if n_bad:
        return Comparison(False, max_abs, max_rel, f"{where}: {n_bad}/{diff.numel()} values "
                          f"outside atol={atol:.3g} (tol*max|exp|, tol={tol:g}) + "
                          f"rtol={tol:g}*|exp| (max abs err {max_abs:.3g}, "
                          f"max rel err {max_rel:.3g})")
    return Comparison(True, max_abs, max_rel)


def judge_finite_rows(e: torch.Tensor, g: torch.Tensor,
                       tol: float) -> list[tuple[bool, float, float]] | None:
    """(ok, max abs, max rel) a row (a call) of ``e`` against ``g`` (2-D, floating, one
    dtype) in fewer passes; None (the full judgement decides) unless every
    difference is finite. A finite difference needs both values finite (a NaN or an
    infinity on either side leaves NaN or an infinity in it), so no finiteness masks are
    needed; an overflowing difference also goes to the full judgement. The threshold, the
    maxima and the ratio are formed as the full judgement forms them."""
    diff = torch.sub(e, g).abs_()
    max_abs = diff.amax(dim=1)
    if not bool(torch.isfinite(max_abs).all()):
        return None
    magnitude = e.abs()
    atol = torch.tensor([tol * m for m in magnitude.amax(dim=1).tolist()], dtype=e.dtype,
                        device=e.device)
    bound = torch.mul(magnitude, tol).add_(atol[:, None])
    # not (diff <= bound), not diff > bound: a NaN difference fails here even where a
    # reduction above had dropped it (PyTorch's maxima propagate NaN; this need not rely on it)
    bad = torch.le(diff, bound).logical_not_().any(dim=1)
    ratio = torch.div(diff, magnitude.clamp_min_(1e-12), out=bound)
    rows = torch.stack([bad.to(e.dtype), max_abs, ratio.amax(dim=1)], dim=1).tolist()
    return [(not f, _finite(a), _finite(r)) for f, a, r in rows]


def _exactly(e: torch.Tensor, g: torch.Tensor, where: str) -> Comparison:
    """Integers and booleans: equal or not, value for value (a float64 difference would
    round away differences above 2**53). The error reported is that difference."""
    n_bad = int((e != g).sum())
    max_abs = float((e.to(torch.float64) - g.to(torch.float64)).abs().max())
    if not n_bad:
        return Comparison(True, max_abs, max_abs)
    by = f"max {max_abs:g}" if max_abs else "by less than float64 resolves"
    return Comparison(False, max_abs, max_abs,
                      f"{where}: {n_bad}/{e.numel()} integer values differ ({by})")


def dtype_message(where: str, got: torch.dtype, expected: torch.dtype) -> str:
    return (f"{where}: dtype differs: the candidate returns {dtype_name(got)}; the reference "
            f"returns {dtype_name(expected)}")


def compare_outputs(expected: Any, got: Any, preset: str, floor: float = 0.0) -> Comparison:
    """``got`` against ``expected`` under the preset; ``floor``: the tolerance at least (for
    floating outputs: what the baseline itself differs from strict fp32 by)."""
    exp, cand = as_tensors(expected), as_tensors(got)
    if exp is None:
        return Comparison(False, message="the reference output is not a tensor or tuple of them")
    if cand is None:
        return Comparison(False, message=f"output is a {type(got).__name__}, expected tensors")
    if len(cand) != len(exp):
        return Comparison(False, message=f"{len(cand)} outputs, expected {len(exp)}")
    worst = Comparison(True)
    for idx, (e, g) in enumerate(zip(exp, cand, strict=True)):
        one = _compare_one(e, g, preset, idx, floor)
        if not one.ok:
            return one
        worst = Comparison(True, max(worst.max_abs_err, one.max_abs_err),
                           max(worst.max_rel_err, one.max_rel_err))
    return worst


def to_device(value: Any, device: torch.device) -> Any:
    return value.to(device) if isinstance(value, torch.Tensor) else value


def clone_inputs(inputs: list[Any]) -> list[Any]:
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]


_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def as_bits(t: torch.Tensor) -> torch.Tensor:
    """The tensor's bytes as integers of its element size: equal exactly when bitwise equal
    (NaN's payload and the sign of zero count; a float maximum is not an infinity)."""
    if t.is_complex():
        t = torch.view_as_real(t)
    return t.view(_BITS[t.element_size()]) if t.is_floating_point() else t


def same_inputs(a: list[Any], b: list[Any]) -> bool:
    """Bitwise equal, tensor by tensor."""
    for x, y in zip(a, b, strict=True):
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            if x.shape != y.shape or x.dtype != y.dtype:
                return False
            if not torch.equal(as_bits(x), as_bits(y)):
                return False
    return True


def _fill_value(dtype: torch.dtype) -> float | int | bool:
    if dtype.is_floating_point or dtype.is_complex:
        return float("nan")
    if dtype == torch.bool:
        return True
    return int(torch.iinfo(dtype).max)


def poison(device: torch.device, like: Any = None) -> None:
    """Fill soon-to-be-reused memory with NaN (or max ints), then free it.

    A candidate returning an unwritten ``torch.empty`` then reads poison instead of
    the reference's previous output (the caching allocator hands the same blocks out).
    """
    big_mb = 64 if device.type == "cuda" else 4
    buffers = [torch.full((big_mb * 2**20 // 4,), float("nan"), device=device)]
    shaped = as_tensors(like) if like is not None else None
    for t in shaped or []:
        buffers.append(torch.full_like(t, _fill_value(t.dtype), device=device))
    del buffers


def needed_tolerance(expected: Any, got: Any) -> float:
    """The smallest tol under which ``got`` passes against ``expected`` (the rule above, over
    the finite floating values; 0 when nothing is floating)."""
    worst = 0.0
    for e, g in zip(as_tensors(expected) or [], as_tensors(got) or [], strict=False):
        if not e.dtype.is_floating_point or e.shape != g.shape or e.numel() == 0:
            continue
        e64, g64 = e.detach().double(), g.detach().double()
        keep = torch.isfinite(e64) & torch.isfinite(g64)
        e64, g64 = e64[keep], g64[keep]
        if e64.numel() == 0:
            continue
        bound = e64.abs().max() + e64.abs()
        worst = max(worst, float(((e64 - g64).abs() / bound.clamp_min(1e-30)).max()))
    return worst
