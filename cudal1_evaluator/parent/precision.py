"""Precision parity (stdlib only): which precision the candidate computes in, and the
reference settings that match it.

From what runs, never from source text: the settings the candidate changed against the
baseline (reported after import and after its calls) and the reduced floating dtypes that
reached its aten ops during correctness calls after the first (``candidate_side.dtype_watch``).
The matched reference adopts the same flags and, for half/bf16 math, runs under
``torch.autocast``. Correctness is always judged against the strict fp32 reference. The
source's mentions of half types are kept as a hint (``source_hint``) and decide nothing.
"""

from __future__ import annotations

import re
from pathlib import Path

from cudal1_evaluator.verdict_details import PrecisionInfo, SettingsChanged

OBSERVED_KEY = "observed.reduced_float_dtypes"  # candidate_side.dtype_watch.OBSERVED_KEY
BASELINE = "baseline"  # no matched reference: the candidate runs at the baseline's precision

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


def _observed(settings: SettingsChanged) -> list[str]:
    """The reduced floating dtypes the runner saw reach aten ops (``dtype_watch``)."""
    after = _after(settings.get(OBSERVED_KEY))
    return [str(d) for d in after] if isinstance(after, list) else []


def source_hint(source: str) -> str:
    """What the source text mentions (fp16, bf16, both, or ""): a hint shown to the user,
    never a verdict: the mention may sit in a branch that never runs."""
    fp16, bf16 = bool(_FP16.search(source)), bool(_BF16.search(source))
    return "fp16+bf16" if fp16 and bf16 else "fp16" if fp16 else "bf16" if bf16 else ""


def cpu_has_bf16_units() -> bool:
    """Whether this x86 CPU multiplies in bf16 (``avx512_bf16`` or AMX): there, a float32
    matmul precision below "highest" really computes in bf16; elsewhere it does nothing."""
    try:
        flags = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return False
    return bool(re.search(r"\b(avx512_bf16|amx_bf16)\b", flags))


def _on_cpu(settings: SettingsChanged) -> str:
    """A CPU ignores the TF32 switches; "medium" matmul precision is bf16 where the CPU has
    bf16 units, and nothing where it has none."""
    medium = any(str(_after(v)) == "medium" for k, v in settings.items()
                 if k.endswith("precision"))
    return "bf16" if medium and cpu_has_bf16_units() else "fp32"


def classify(settings_changed: SettingsChanged, source: str = "",
             device: str = "cuda") -> PrecisionInfo:
    """From what ran: the settings in effect during the candidate's calls (those it changed
    against the baseline) and the reduced dtypes that reached its ops (carried under
    ``OBSERVED_KEY``). {"candidate": fp32|tf32|fp16|bf16|mixed, "reference": baseline|tf32|
    autocast-fp16|autocast-bf16, "settings": the precision flags the candidate changed,
    "autocast": ..., "observed": the reduced dtypes seen, "source_hint": what the text
    mentions (informative only)}."""
    observed = _observed(settings_changed)
    fp16, bf16 = "float16" in observed, "bfloat16" in observed
    tf32 = _tf32(settings_changed)
    if fp16 and bf16:
        candidate = "mixed"
    elif fp16 or bf16:
        candidate = "fp16" if fp16 else "bf16"
    elif not device.startswith("cuda"):
        candidate = _on_cpu(settings_changed)
    else:
        candidate = "tf32" if tf32 else "fp32"
    autocast = "fp16" if fp16 else "bf16" if bf16 else None
    reference = f"autocast-{autocast}" if autocast else "tf32" if tf32 else BASELINE
    flags = {k: v for k, v in settings_changed.items()
             if "tf32" in k or "precision" in k or k == "cudnn.benchmark"}
    info: PrecisionInfo = {"candidate": candidate, "reference": reference, "settings": flags,
                           "autocast": autocast, "observed": observed}
    hint = source_hint(source)
    if hint:
        info["source_hint"] = hint
    return info


def matched_differs(precision: PrecisionInfo) -> bool:
    return precision.get("reference") not in (BASELINE, "fp32-strict") or \
        bool(precision.get("settings"))


def needs_own_referee(settings_changed: SettingsChanged) -> bool:
    """Whether the matched reference needs a process that never ran under other settings:
    cuDNN's plan cache is keyed without ``cudnn.benchmark``, so plans chosen before it was
    turned on stay chosen."""
    return _after(settings_changed.get("cudnn.benchmark")) is True
