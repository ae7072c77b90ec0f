"""The reference as a runner's candidate (stdlib only): the sibling that times the reference
through exactly the loop, the hand-off and the window the candidate gets.

Its source is the problem's own plus ``ModelNew = Model``; the matched runner's source also
applies the candidate's precision settings at import (only known settings, only plain values:
the settings come from the candidate's process), the one-thread runner's also one intra-op
thread (``thread_budget``), and, for half or bf16 math, runs ``forward`` under
``torch.autocast`` with floating outputs cast back to fp32.
"""

from __future__ import annotations

import re
from dataclasses import replace

from cudal1_evaluator.parent.build_cache import default_build_dir
from cudal1_evaluator.schema import Job
from cudal1_evaluator.wire.talk_messages import MatchedSettings

# the candidate's settings the matched reference adopts (precision parity)
PRECISION_KEYS = (
    "float32_matmul_precision", "cudnn.allow_tf32", "cuda.matmul.allow_tf32", "cudnn.benchmark",
    "cuda.matmul.allow_fp16_reduced_precision_reduction",
    "cuda.matmul.allow_bf16_reduced_precision_reduction", "fp32_precision",
    "cuda.matmul.fp32_precision", "cudnn.fp32_precision", "cudnn.conv.fp32_precision",
    "mkldnn.fp32_precision", "mkldnn.matmul.fp32_precision", "mkldnn.conv.fp32_precision",
)
_WORD = re.compile(r"^[a-z0-9_]{1,32}$")
_AUTOCAST = {"fp16": "float16", "bf16": "bfloat16"}

_AUTOCAST_MODEL = '''

class ModelNew(Model):
    def forward(self, *args, **kwargs):
        with _cudal1_torch.autocast({device!r}, dtype=_cudal1_torch.{dtype}):
            out = super().forward(*args, **kwargs)
        return _cudal1_fp32(out)


def _cudal1_fp32(out):
    if isinstance(out, (tuple, list)):
        return type(out)(_cudal1_fp32(o) for o in out)
    if isinstance(out, _cudal1_torch.Tensor) and out.dtype in (_cudal1_torch.float16,
                                                                _cudal1_torch.bfloat16):
        return out.float()
    return out
'''


def _value(after: object) -> str | None:
    """A setting's new value as a Python literal, or None when it is not a plain one."""
    if isinstance(after, bool):
        return repr(after)
    if isinstance(after, str) and _WORD.match(after):
        return repr(after)
    return None


def _setting_lines(settings: object) -> list[str]:
    lines: list[str] = []
    if not isinstance(settings, dict):
        return lines
    for key in PRECISION_KEYS:
        change = settings.get(key)
        value = _value(change.get("after")) if isinstance(change, dict) else None
        if value is None:
            continue
        if key == "float32_matmul_precision":
            lines.append(f"_cudal1_torch.set_float32_matmul_precision({value})")
        else:
            lines.append(f"_cudal1_torch.backends.{key} = {value}")
    return lines


def source(problem_source: str, matched: MatchedSettings | None = None,
           device: str = "cpu") -> str:
    """The reference runner's candidate source (``matched``: under the candidate's precision)."""
    parts = [problem_source.rstrip(), "", "import torch as _cudal1_torch"]
    autocast = _AUTOCAST.get(str(matched.get("autocast"))) if matched else None
    if matched:
        parts += _setting_lines(matched.get("settings"))
        threads = matched.get("threads")
        if isinstance(threads, int) and not isinstance(threads, bool) and 0 < threads <= 1024:
            parts.append(f"_cudal1_torch.set_num_threads({threads})")
    if autocast:
        parts.append(_AUTOCAST_MODEL.format(device=device.split(":")[0], dtype=autocast))
    else:
        parts.append("ModelNew = Model")
    return "\n".join(parts) + "\n"


def job(candidate_job: Job, matched: MatchedSettings | None = None,
        baseline: str = "") -> Job:
    """The runner's job: the candidate's job with the reference as its candidate, no profile,
    no strict re-evaluation of its own; it builds nothing, so its (empty) build dir goes to
    the default cache, not the user's. It starts at the job's baseline (PyTorch's defaults
    unless the job says strict), as the candidate's runner does; ``baseline="strict"`` makes
    the strict fp32 runner to time beside it."""
    return replace(candidate_job, candidate_source=source(candidate_job.problem_source, matched,
                                                          candidate_job.device),
                   profile=False, compare_torch_compile=False,
                   build_dir=str(default_build_dir().absolute()),
                   baseline=baseline or candidate_job.baseline)


def baseline_name(job: Job) -> str:
    """The timed reference as the header names it."""
    if job.baseline == "strict":
        return "eager, strict fp32 (TF32 off for cuDNN and matmuls)"
    if job.device.startswith("cuda"):
        return ("eager, PyTorch defaults: cuDNN TF32 on, matmul TF32 off (and what the "
                "problem file sets at import)")
    return "eager, PyTorch defaults (and what the problem file sets at import)"
