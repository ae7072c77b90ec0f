"""Precision parity (stdlib only): which precision the candidate computes in, and the
reference settings that match it.

From the settings the candidate changed (reported after import and after its calls) and a
cheap scan of its source for half/bf16 math. The matched reference adopts the same flags and,
for half/bf16 math, runs under ``torch.autocast``. Correctness is always judged against the
strict fp32 reference.
"""

from __future__ import annotations

import re

from cudal1_evaluator.verdict_details import PrecisionInfo, SettingsChanged

_TF32_FLAGS = ("cudnn.allow_tf32", "cuda.matmul.allow_tf32")
_REDUCED_FP32 = {"high", "medium", "tf32", "bf16"}
_FP16 = re.compile(r"\.half\(\)|torch\.float16\b|torch\.half\b|\"float16\"|'float16'")
_BF16 = re.compile(r"\.bfloat16\(\)|torch\.bfloat16\b|\"bfloat16\"|'bfloat16'")


def _after(change: object) -> object:
    return change.get("after") if isinstance(change, dict) else None


def _tf32(settings: SettingsChanged) -> bool:
    if any(_after(settings.get(k)) is True for k in _TF32_FLAGS):
        return True
    return any(str(_after(v)) in _REDUCED_FP32 for k, v in settings.items()
               if k.endswith("precision"))


def classify(settings_changed: SettingsChanged, source: str) -> PrecisionInfo:
    """{"candidate": fp32|tf32|fp16|bf16|mixed, "reference": fp32-strict|tf32|autocast-fp16|
    autocast-bf16, "settings": the precision flags the candidate changed, "autocast": ...}."""
    fp16, bf16 = bool(_FP16.search(source)), bool(_BF16.search(source))
    tf32 = _tf32(settings_changed)
    if fp16 and bf16:
        candidate = "mixed"
    elif fp16 or bf16:
        candidate = "fp16" if fp16 else "bf16"
    else:
        candidate = "tf32" if tf32 else "fp32"
    autocast = "fp16" if fp16 else "bf16" if bf16 else None
    reference = f"autocast-{autocast}" if autocast else "tf32" if tf32 else "fp32-strict"
    flags = {k: v for k, v in settings_changed.items()
             if "tf32" in k or "precision" in k or k == "cudnn.benchmark"}
    return {"candidate": candidate, "reference": reference, "settings": flags,
            "autocast": autocast}


def matched_differs(precision: PrecisionInfo) -> bool:
    return precision.get("reference") != "fp32-strict" or bool(precision.get("settings"))


def needs_own_referee(settings_changed: SettingsChanged) -> bool:
    """Whether the matched reference needs a process that never ran under other settings:
    cuDNN's plan cache is keyed without ``cudnn.benchmark``, so plans chosen before it was
    turned on stay chosen."""
    return _after(settings_changed.get("cudnn.benchmark")) is True
