"""A torch device name (``cuda:1``) as the GPU ``nvidia-smi`` numbers (``CUDA_VISIBLE_DEVICES``
renumbers what torch sees; ``nvidia-smi`` always shows every GPU)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from cudal1_tui.gpushare.smi import GpuRow


def torch_index(device: str) -> int | None:
    """``cuda`` → 0, ``cuda:N`` → N; None for a CPU (or anything else)."""
    value = device.strip().lower()
    if value == "cuda":
        return 0
    head, _, tail = value.partition(":")
    return int(tail) if head == "cuda" and tail.isdigit() else None


def physical_gpu(device: str, rows: list[GpuRow] | None,
                 env: Mapping[str, str] | None = None) -> int | None:
    """The ``nvidia-smi`` index of the GPU ``device`` names in an evaluator started with
    ``env``; None for a CPU, or when ``CUDA_VISIBLE_DEVICES`` names what we cannot map."""
    index = torch_index(device)
    if index is None:
        return None
    visible = (os.environ if env is None else env).get("CUDA_VISIBLE_DEVICES")
    if visible is None or not visible.strip():
        return index
    entries = [e.strip() for e in visible.split(",") if e.strip()]
    if index >= len(entries):
        return None
    entry = entries[index]
    if entry.isdigit():
        return int(entry)
    match = [r.index for r in rows or [] if entry.startswith("GPU-") and r.uuid.startswith(entry)]
    return match[0] if len(match) == 1 else None
