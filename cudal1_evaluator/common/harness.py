"""What the worker and the pristine-reference process share: device, clock, problem, inputs.

Everything the evaluator relies on (the problem's ``get_inputs``/``get_init_inputs``,
``torch.manual_seed``, ``torch.no_grad``, the clock) is bound here, before any
candidate code is imported.
"""

from __future__ import annotations

import copy
import importlib.util
import os
import sys
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from torch.utils._device import DeviceContext

from cudal1_evaluator.common.compare import to_device
from cudal1_evaluator.common.timing import Clock, Plan
from cudal1_evaluator.schema import Job

# The reference is a strict fp32 computation: cuDNN convolutions default to TF32 on Ampere and
# later, which alone puts honest fp32 rewrites ~5e-4 off the reference (strict is 1e-4). A
# candidate may still turn TF32 on for itself: it is then timed and checked under its own
# settings, and the tolerance decides.
STRICT_FP32 = {"cudnn.allow_tf32": False, "cuda.matmul.allow_tf32": False,
               "float32_matmul_precision": "highest"}


def strict_fp32() -> dict[str, bool | str]:
    """Turn TF32 off for matmuls and cuDNN (before any model runs); the settings as read back."""
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    return _read_back()


# PyTorch's own defaults for the precision switches (what the user's code runs under unless it
# or the problem file changes them): cuDNN convolutions in TF32 on Ampere and later, matmuls in
# full fp32.
TORCH_DEFAULTS = {"cudnn.allow_tf32": True, "cuda.matmul.allow_tf32": False,
                  "float32_matmul_precision": "highest"}
BASELINES = ("defaults", "strict")  # Job.baseline


def torch_defaults() -> dict[str, bool | str]:
    """Put the precision switches at PyTorch's defaults (a warm child may have run under other
    settings); the settings as read back."""
    torch.backends.cudnn.allow_tf32 = True
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    return _read_back()


def _read_back() -> dict[str, bool | str]:
    return {"cudnn.allow_tf32": bool(torch.backends.cudnn.allow_tf32),
            "cuda.matmul.allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
            "float32_matmul_precision": torch.get_float32_matmul_precision()}


def baseline_settings(baseline: str) -> dict[str, bool | str]:
    """``strict``: strict fp32 (the referee's correctness reference); ``defaults``: PyTorch's
    defaults, the baseline the user's own code runs at. The problem file, imported after,
    may change either."""
    return strict_fp32() if baseline == "strict" else torch_defaults()


def inputs_within(context: DeviceContext, get_inputs: Callable[[], Any]) -> list[Any]:
    """``get_inputs()`` with torch's factory functions defaulting to the context's device."""
    with context:
        return list(get_inputs())


class SetupError(Exception):
    """The problem or the device is unusable: not the candidate's fault."""


def describe_exception(exc: BaseException, *, limit: int = 3000) -> str:
    """``Type: message`` plus the last traceback lines; out-of-memory said plainly."""
    text = f"{type(exc).__name__}: {exc}"
    lowered = text.lower()
    if isinstance(exc, MemoryError) or "out of memory" in lowered or "allocate memory" in lowered:
        text = f"out of memory: {text}"
    frames = traceback.format_exception(type(exc), exc, exc.__traceback__)
    tail = "".join(frames[-4:-1]).rstrip() if len(frames) > 2 else ""
    joined = f"{text}\n{tail}" if tail else text
    return joined if len(joined) <= limit else joined[: limit - 20] + "\n... (trimmed)"


def load_source(name: str, source: str, directory: Path) -> ModuleType:
    """Import ``source`` from a real file (Triton and inspect need one)."""
    path = directory / f"{name}.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def new_seed() -> int:
    return int.from_bytes(os.urandom(8), "little") & ((1 << 63) - 1)


def open_device(spec: str) -> torch.device:
    try:
        device = torch.device(spec)
    except RuntimeError as exc:
        raise SetupError(f"bad device {spec!r}: {exc}") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise SetupError(f"device {spec!r} requested but torch.cuda.is_available() is False")
        index = device.index if device.index is not None else torch.cuda.current_device()
        if index >= torch.cuda.device_count():
            raise SetupError(f"device {spec!r}: only {torch.cuda.device_count()} GPU(s)")
        torch.cuda.set_device(index)
        return torch.device("cuda", index)
    if device.type != "cpu":
        raise SetupError(f"unsupported device {spec!r} (cpu, cuda or cuda:N)")
    return device


def plan_of(job: Job) -> Plan:
    return Plan(job.warmup, job.min_samples, job.max_samples, job.timing_budget_s,
                job.stable_rel_ci)


class Harness:
    """The pristine side: problem module, seeded inputs, the reference model. ``baseline``:
    the precision switches before the problem is imported (``strict`` for the referee's
    correctness reference, ``job.baseline`` for the runners that are timed)."""

    def __init__(self, job: Job, init_seed: int | None = None,
                 baseline: str = "strict") -> None:
        self.job = job
        self.baseline_settings = baseline_settings(baseline)
        self.device = open_device(job.device)
        self.clock = Clock(self.device)
        self.workdir = Path(tempfile.mkdtemp(prefix="eval-src-"))
        self._seed = torch.manual_seed
        self.no_grad = torch.no_grad
        # inputs made on the GPU itself: host-side randn of large tensors dominated cached
        # re-evaluations (seconds per input set); dropped if the problem's get_inputs fails there
        self._on_device: DeviceContext | None = (
            DeviceContext(self.device) if self.device.type == "cuda" else None)
        try:
            self.problem = load_source("cudal1_reference_problem", job.problem_source,
                                       self.workdir)
            self._get_inputs: Callable[[], Any] = self.problem.get_inputs
            self._get_init_inputs: Callable[[], Any] = self.problem.get_init_inputs
            self.model_cls: type[torch.nn.Module] = self.problem.Model
            self.init_seed = new_seed() if init_seed is None else init_seed
            self._seed(self.init_seed)
            self.init_inputs = list(self._get_init_inputs())
        except Exception as exc:
            raise SetupError(f"the problem failed to load: {describe_exception(exc)}") from None

    def make_inputs(self, seed: int | None = None) -> list[Any]:
        """A fresh input set from ``seed`` (the parent's) or one nobody can predict."""
        seed = new_seed() if seed is None else seed
        self._seed(seed)
        if self._on_device is not None:
            try:
                made = inputs_within(self._on_device, self._get_inputs)
                return [to_device(x, self.device) for x in made]
            except Exception:
                self._on_device = None  # this get_inputs needs the host: make them there
                self._seed(seed)
        return [to_device(x, self.device) for x in self._get_inputs()]

    def construct(self, cls: Callable[..., torch.nn.Module]) -> torch.nn.Module:
        """Same seed before every construction, so default initialisations agree."""
        self._seed(self.init_seed)
        return cls(*copy.deepcopy(self.init_inputs))

    def reference_model(self) -> torch.nn.Module:
        try:
            return self.construct(self.model_cls).to(self.device)
        except Exception as exc:
            raise SetupError(f"the reference Model failed: {describe_exception(exc)}") from None

    @staticmethod
    def caller(model: Callable[..., Any]) -> Callable[[list[Any]], Any]:
        """``model(*args)``; run it under ``self.no_grad()`` (entered once per phase)."""

        def call(args: list[Any]) -> Any:
            return model(*args)

        return call


def load_matching_state(reference: torch.nn.Module, candidate: torch.nn.Module) -> int:
    """Copy the reference's parameters/buffers into the candidate where name and shape match."""
    mine = candidate.state_dict()
    matched = {
        k: v for k, v in reference.state_dict().items()
        if k in mine and isinstance(mine[k], torch.Tensor) and mine[k].shape == v.shape
    }
    if matched:
        candidate.load_state_dict(matched, strict=False)
    return len(matched)
