"""Every call of a window checked at once: the same answers as ``compare_outputs`` and
``same_inputs`` call by call, with two device syncs a chunk instead of several a call.

A window of a microsecond kernel holds up to a thousand calls; checked one by one, each call's
comparison waited for the device five or six times (0.3 s a window on an H200, 3 s of an
evaluation). Calls whose outputs are alike (one shape, dtype and device per output, floating,
not empty: every call of a window) are stacked, a chunk at a time, and judged by row. A call
any row of which fails, and every call unlike the rest, is judged again by
``compare_outputs`` itself, so a failure reads exactly as it did; a pass has the same maximum
errors (maxima are exact, and the threshold is formed in the same precision). A chunk whose
differences are all finite (the common case) skips the finiteness masks, and a lone call's
output is viewed rather than stacked: a 1 GiB output's check took ~15 passes over it before.
On a CPU, where nothing waits, calls are judged one at a time (``BATCH_ON_CPU``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from cudal1_evaluator.common.compare import (
    Comparison,
    _finite,
    as_bits,
    as_tensors,
    compare_outputs,
    judge_finite_rows,
    same_inputs,
    tolerance_for,
)

CHUNK_BYTES = 16 * 2**20  # stacked bytes of one output at a time: a few times this is the
# check's transient device memory (a GPU shared with a model server has little to spare)
# Stacking saves device syncs; on a CPU there are none to save, only the copies to pay (1.0-2x
# slower measured on this repo's 2-core host), so CPU tensors are judged one call at a time.
BATCH_ON_CPU = False


def compare_many(pairs: Sequence[tuple[Any, Any]], preset: str,
                 floor: float = 0.0) -> list[Comparison]:
    """``compare_outputs(expected, got, preset, floor)`` for each pair, in order."""
    results: list[Comparison | None] = [None] * len(pairs)
    groups: dict[tuple[Any, ...], list[int]] = {}
    for i, (expected, got) in enumerate(pairs):
        key = _signature(expected, got)
        if key is None:
            results[i] = compare_outputs(expected, got, preset, floor)
        else:
            groups.setdefault(key, []).append(i)
    for key, members in groups.items():
        for chunk in _chunks(members, _row_bytes(key)):
            for i, found in zip(chunk, _judge_chunk([pairs[i] for i in chunk], preset, floor),
                                strict=True):
                results[i] = found if found is not None else \
                    compare_outputs(pairs[i][0], pairs[i][1], preset, floor)
    return [r for r in results if r is not None]


def mutated_many(inputs: Sequence[Sequence[Any]],
                 originals: Sequence[Sequence[Any]]) -> list[list[int]]:
    """For each call, the indices ``j`` where ``same_inputs([inputs[j]], [originals[j]])``
    is False."""
    found: list[list[int]] = [[] for _ in inputs]
    if not inputs:
        return found
    if any(len(a) != len(inputs[0]) or len(b) != len(a)
           for a, b in zip(inputs, originals, strict=True)):
        raise ValueError("every call's inputs must match its originals, input for input")
    for j in range(len(inputs[0])):
        column = [(a[j], b[j]) for a, b in zip(inputs, originals, strict=True)]
        for call, differs in enumerate(_differ(column)):
            if differs:
                found[call].append(j)
    return found


def _differ(column: list[tuple[Any, Any]]) -> list[bool]:
    first = column[0][0]
    alike = isinstance(first, torch.Tensor) and all(
        isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
        and a.shape == b.shape == first.shape and a.dtype == b.dtype == first.dtype
        and a.device == b.device == first.device for a, b in column)
    if not alike or first.numel() == 0 or not _batched_on(first.device):
        return [not same_inputs([a], [b]) for a, b in column]
    row = first.numel() * first.element_size() * 2
    out: list[bool] = []
    for chunk in _chunks(list(range(len(column))), row):
        a = _rows([as_bits(column[i][0]) for i in chunk])
        b = _rows([as_bits(column[i][1]) for i in chunk])
        out += (a != b).any(dim=1).tolist()
    return out


def _signature(expected: Any, got: Any) -> tuple[Any, ...] | None:
    """What makes calls stackable together; None for a call judged on its own."""
    exp, cand = as_tensors(expected), as_tensors(got)
    if not exp or cand is None or len(exp) != len(cand):
        return None
    key: list[Any] = []
    for e, g in zip(exp, cand, strict=True):
        if type(g) is not torch.Tensor or g.shape != e.shape or g.dtype != e.dtype or \
                g.device != e.device or e.numel() == 0 or not e.is_floating_point() or \
                e.is_complex() or not _batched_on(e.device):
            return None
        key.append((tuple(e.shape), e.dtype, e.device))
    return tuple(key)


def _batched_on(device: torch.device) -> bool:
    return device.type != "cpu" or BATCH_ON_CPU


def _row_bytes(key: tuple[Any, ...]) -> int:
    wide = [8 if dtype == torch.float64 else 4 for _, dtype, _ in key]
    return max(1, max(torch.Size(shape).numel() * w for (shape, _, _), w in
                      zip(key, wide, strict=True)) * 2)


def _chunks(members: list[int], row_bytes: int) -> list[list[int]]:
    size = max(1, CHUNK_BYTES // row_bytes)
    return [members[k:k + size] for k in range(0, len(members), size)]


def _judge_chunk(pairs: list[tuple[Any, Any]], preset: str,
                 floor: float) -> list[Comparison | None]:
    """Each call's Comparison where every output passes; None where one fails (judged again
    call by call for its message)."""
    worst = [(0.0, 0.0)] * len(pairs)
    passed = [True] * len(pairs)
    exps = [as_tensors(e) or [] for e, _ in pairs]
    gots = [as_tensors(g) or [] for _, g in pairs]
    for k in range(len(exps[0])):
        exp, got = [items[k] for items in exps], [items[k] for items in gots]
        for row, (ok, max_abs, max_rel) in enumerate(_judge_output(exp, got, preset, floor)):
            passed[row] = passed[row] and ok
            worst[row] = (max(worst[row][0], max_abs), max(worst[row][1], max_rel))
    return [Comparison(True, a, r) if ok else None
            for ok, (a, r) in zip(passed, worst, strict=True)]


def _judge_output(exp: list[torch.Tensor], got: list[torch.Tensor], preset: str,
                  floor: float) -> list[tuple[bool, float, float]]:
    """``_compare_one`` for one output of many calls, row by row: (ok, max abs, max rel)."""
    dtype = exp[0].dtype
    tol = tolerance_for(preset, dtype)
    tol = max(tol, floor) if tol else tol
    wide = torch.float64 if dtype == torch.float64 else torch.float32
    e, g = _rows(exp).to(wide), _rows(got).to(wide)
    finite = judge_finite_rows(e, g, tol)
    if finite is not None:
        return finite
    e_fin, g_fin = torch.isfinite(e), torch.isfinite(g)
    positions = (e_fin != g_fin).any(dim=1)
    specials = (~e_fin & (torch.nan_to_num(e, nan=0.5) != torch.nan_to_num(g, nan=0.5))
                ).any(dim=1)
    e, g = torch.where(e_fin, e, 0.0), torch.where(e_fin, g, 0.0)
    diff = (e - g).abs_()
    magnitude = e.abs()
    rel = diff / magnitude.clamp_min(1e-12)
    # the threshold as compare_outputs forms it: tol * max|exp| in Python's double, then
    # taken into the tensor's dtype where it meets ``tol * |exp|``
    atol = torch.tensor([tol * m for m in magnitude.amax(dim=1).tolist()], dtype=wide,
                        device=e.device)
    bad = (diff > atol[:, None] + tol * magnitude).any(dim=1)
    failed = (positions | specials | bad).tolist()
    max_abs, max_rel = diff.amax(dim=1).tolist(), rel.amax(dim=1).tolist()
    return [(not f, _finite(a), _finite(r))
            for f, a, r in zip(failed, max_abs, max_rel, strict=True)]


def _rows(items: list[torch.Tensor]) -> torch.Tensor:
    """One row a call; a lone call's tensor is viewed, not copied (a 1 GiB output is a
    chunk's only call, and a stack of it was a 1 GiB copy a side)."""
    if len(items) == 1:
        return items[0].detach().reshape(1, -1)
    return torch.stack([t.detach() for t in items]).reshape(len(items), -1)
