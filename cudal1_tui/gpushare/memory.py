"""Room on the GPU for an evaluation, checked before it starts.

The probe reports the problem's input and output shapes and dtypes and the parameter count,
not a peak: what an evaluation needs is estimated from them. The evaluator keeps the
reference and the candidate (two copies of the weights), several input sets, the reference's
and the candidate's outputs and poisoned output buffers, an L2-flush buffer, and a CUDA
context in each of its two GPU processes; intermediate activations are not reported, so the
tensors count ``ACTIVATION_FACTOR`` times. The ``gpu_memory_margin_mb`` setting comes on top.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from cudal1_evaluator.schema import ProbeResult, TensorSpec
from cudal1_tui.errors import Cudal1Error
from cudal1_tui.gpushare.server_gpus import KIND_NAMES

MIB = 2**20
CONTEXT_MIB = 500  # one CUDA context with torch's kernels loaded, per evaluator process
GPU_PROCESSES = 2  # the trusted referee and the candidate's process
FLUSH_MIB = 128  # the L2 flush buffer (twice the L2: 100 MiB on an H100)
WEIGHT_BYTES = 4  # the probe counts parameters, not their dtype: fp32 assumed
INPUT_SETS = 3  # timing, correctness and recheck inputs alive at once
OUTPUT_COPIES = 4  # reference, candidate, poisoned buffers, templates
ACTIVATION_FACTOR = 2.0

DTYPE_BYTES = {"float64": 8, "double": 8, "int64": 8, "long": 8, "complex64": 8,
               "complex128": 16, "float32": 4, "float": 4, "int32": 4, "int": 4,
               "float16": 2, "half": 2, "bfloat16": 2, "int16": 2, "short": 2,
               "int8": 1, "uint8": 1, "bool": 1}

SERVER_FIXES = {
    "vllm": "restart vLLM with a lower --gpu-memory-utilization (e.g. 0.6; the default 0.9 "
            "takes 90% of the card)",
    "sglang": "restart SGLang with a lower --mem-fraction-static (e.g. 0.6)",
    "llama.cpp": "restart llama-server with fewer layers on the GPU (--n-gpu-layers / -ngl) "
                 "or a smaller --ctx-size",
    "ollama": "give Ollama less of the GPU: set OLLAMA_GPU_OVERHEAD (bytes to keep free) and "
              "restart `ollama serve`, or lower num_gpu in the model's options",
    "transformers": "serve a smaller model, or serve it on another GPU or the CPU",
}
GENERIC_FIX = ("leave room for the evaluation: vLLM --gpu-memory-utilization 0.6, SGLang "
               "--mem-fraction-static 0.6, llama.cpp --n-gpu-layers N, Ollama "
               "OLLAMA_GPU_OVERHEAD; or time on another GPU (--device cuda:N)")


class GpuMemoryError(Cudal1Error):
    """Too little free memory on the timing GPU for an evaluation."""


@dataclass(frozen=True)
class Need:
    """What an evaluation of the problem needs on the GPU, in MiB, and how it was reckoned."""

    mib: int
    tensors_mib: float
    weights_mib: float


def tensor_bytes(spec: TensorSpec) -> int:
    return math.prod(spec.shape) * DTYPE_BYTES.get(spec.dtype.removeprefix("torch."), 4)


def estimate(probe: ProbeResult) -> Need:
    """The estimated need of one evaluation (see the module's docstring)."""
    inputs = sum(tensor_bytes(s) for s in probe.inputs)
    outputs = sum(tensor_bytes(s) for s in probe.outputs)
    weights = 2 * probe.parameter_count * WEIGHT_BYTES
    tensors = (INPUT_SETS * inputs + OUTPUT_COPIES * outputs) * ACTIVATION_FACTOR
    fixed = GPU_PROCESSES * CONTEXT_MIB + FLUSH_MIB
    return Need(math.ceil(fixed + (tensors + weights) / MIB), tensors / MIB, weights / MIB)


def check(free_mib: int, need: Need, margin_mib: int, *, gpu: int, server_kind: str = "",
          server_shares: bool = False) -> None:
    """Raise ``GpuMemoryError`` when ``free_mib`` is below the need plus the margin."""
    wanted = need.mib + margin_mib
    if free_mib >= wanted:
        return
    who = _holder(server_kind, server_shares)
    message = (f"too little free memory on GPU {gpu} for an evaluation: {free_mib} MiB free, "
               f"about {wanted} MiB needed ({need.mib} MiB estimated from the problem's "
               f"tensors and weights + {margin_mib} MiB margin){who}")
    raise GpuMemoryError(message, fix=fix_for(server_kind, server_shares))


def _holder(server_kind: str, server_shares: bool) -> str:
    if not server_shares:
        return ""
    name = KIND_NAMES.get(server_kind, "the model server")
    return f"; {name} holds memory on the same GPU"


def fix_for(server_kind: str, server_shares: bool) -> str:
    """The server's own flag when we know the server; else every server's, and the rest."""
    if server_shares and server_kind in SERVER_FIXES:
        return SERVER_FIXES[server_kind]
    return f"{GENERIC_FIX}; `nvidia-smi` lists what holds the GPU's memory"
