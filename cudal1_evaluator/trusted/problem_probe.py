"""Execute a problem file once and describe it: inputs, outputs, parameters, a first timing.

Runs inside an evaluator subprocess (torch + stdlib only). A problem that raises, returns
non-tensors, or whose output barely depends on its inputs is reported as a failed ProbeResult
rather than an exception: a degenerate problem would reward a candidate that returns a constant.

``python -m cudal1_evaluator.trusted.problem_probe JOB.json [RESULT.json]`` runs one job and
writes the result as JSON
(to stdout when no result path is given; the problem's own prints go to stderr).
"""

from __future__ import annotations

import contextlib
import linecache
import platform
import statistics
import sys
import time
import traceback
import types
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import torch

from cudal1_evaluator.schema import ProbeJob, ProbeResult, TensorSpec
from cudal1_evaluator.trusted.output_sensitivity import (
    DEGENERATE_REL,
    degenerate_message,
    equal_tensors,
    perturbed,
    relative_change,
)
from cudal1_evaluator.verdict_details import DeviceInfo

NONDETERMINISTIC_REL = 1e-3  # same inputs twice differing more than this: unverifiable
MAX_TIMED_CALLS = 25
MODULE_NAME = "cudal1_problem"
MIN_TIMED_CALLS = 3


class ProbeFailure(Exception):
    """A reason the problem cannot be optimized honestly; becomes ok=False."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


def run_probe(job: ProbeJob) -> ProbeResult:
    result = ProbeResult(ok=False, versions=_versions())
    try:
        device = _device(job.device)
        result.device = _describe(device)
        _probe(job, device, result)
        result.ok = True
    except ProbeFailure as failure:
        result.error_kind, result.message = failure.kind, failure.message
    except Exception as exc:  # outside the problem's own calls: still a result, not a crash
        result.error_kind = "raises"
        result.message = _describe_exception(exc, _filename(job.problem_name), "probing")
    return result


def _probe(job: ProbeJob, device: torch.device, result: ProbeResult) -> None:
    filename = _filename(job.problem_name)
    module = _load(job.problem_source, filename, job.problem_name)
    init_inputs = _call(filename, "calling get_init_inputs()", module.get_init_inputs)
    init_args = _check_init_inputs(init_inputs)
    result.init_inputs = [_jsonable(a) for a in init_args]
    torch.manual_seed(0)
    model = _call(filename, "building Model(*get_init_inputs())", lambda: module.Model(*init_args))
    if not isinstance(model, torch.nn.Module):
        raise ProbeFailure("bad_model", f"Model(...) built a {type(model).__name__}, "
                                        "not a torch.nn.Module")
    model = _call(filename, f"moving Model to {device}", lambda: model.to(device))
    result.parameter_count = sum(p.numel() for p in model.parameters())
    runner = _Runner(model, module, filename, device)
    first_inputs, first_out = runner.run_seed(0)
    result.inputs = [_spec(t) for t in first_inputs]
    result.outputs = [_spec(t) for t in first_out]
    result.message = _finite_warning(first_out)
    _check_sensitivity(runner, first_inputs, first_out, job.seeds, result)
    result.reference_time_ms = _time_forward(runner, first_inputs, job.timing_budget_s)


# ---------------------------------------------------------------- loading and calling


def _filename(name: str) -> str:
    return name if name.endswith(".py") else f"{name}.py"


def _load(source: str, filename: str, name: str) -> types.ModuleType:
    """Execute the problem as a fresh module; its lines stay in linecache for tracebacks."""
    lines = source.splitlines(keepends=True)
    linecache.cache[filename] = (len(source), None, lines, filename)
    module = types.ModuleType(MODULE_NAME)  # never the file's stem: "torch.py" must not shadow
    module.__file__ = filename
    sys.modules[MODULE_NAME] = module  # dataclasses and pickling look modules up here
    try:
        code = compile(source, filename, "exec")
    except SyntaxError as exc:
        raise ProbeFailure("raises", f"SyntaxError: {exc.msg} ({filename} line {exc.lineno})"
                           ) from exc
    _call(filename, "importing the problem file", lambda: exec(code, module.__dict__))
    missing = [n for n in ("Model", "get_inputs", "get_init_inputs") if not hasattr(module, n)]
    if missing:
        raise ProbeFailure("contract", f"{name} defines no {', '.join(missing)}")
    return module


def _call(filename: str, doing: str, fn: Callable[[], Any]) -> Any:
    """Run problem code; an exception becomes a ProbeFailure naming the problem's line."""
    try:
        return fn()
    except ProbeFailure:
        raise
    except (Exception, SystemExit) as exc:
        raise ProbeFailure("raises", _describe_exception(exc, filename, doing)) from exc


def _describe_exception(exc: BaseException, filename: str, doing: str) -> str:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == filename]
    where = ""
    if frames:
        frame = frames[-1]
        code = f": `{frame.line.strip()}`" if frame.line else ""
        where = f" at {filename} line {frame.lineno}{code}"
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    hint = ""
    if isinstance(exc, torch.cuda.OutOfMemoryError):
        hint = " (the sizes do not fit this GPU: shrink the module-level sizes)"
    return f"{type(exc).__name__}{': ' + text if text else ''} while {doing}{where}{hint}"


def _check_init_inputs(value: object) -> list[Any]:
    if not isinstance(value, list | tuple):
        raise ProbeFailure("bad_inputs", "get_init_inputs() must return a list (Model's "
                                         f"constructor arguments), got {type(value).__name__}")
    return list(value)


def _check_inputs(value: object) -> list[torch.Tensor]:
    if not isinstance(value, list | tuple):
        raise ProbeFailure("bad_inputs", "get_inputs() must return a list of tensors, got "
                                         f"{type(value).__name__}")
    if not value:
        raise ProbeFailure("bad_inputs", "get_inputs() returned an empty list: forward needs "
                                         "inputs, or any constant answer would pass")
    for index, item in enumerate(value):
        if type(item) is not torch.Tensor:
            raise ProbeFailure(
                "bad_inputs", f"get_inputs() element {index} is {type(item).__name__} "
                f"({_short(item)}), not a torch.Tensor: pass constants through "
                "get_init_inputs() or module-level sizes")
    return list(value)


def _check_outputs(value: object) -> list[torch.Tensor]:
    items = list(value) if isinstance(value, list | tuple) else [value]
    bad = [i for i, t in enumerate(items) if not isinstance(t, torch.Tensor)]
    if not items or bad:
        what = type(value).__name__
        if bad and isinstance(value, list | tuple):
            what += f" whose element {bad[0]} is {type(items[bad[0]]).__name__}"
        raise ProbeFailure("non_tensor_output", f"forward returned {what} ({_short(value)}); "
                           "it must return a tensor or a tuple/list of tensors")
    return [t.detach() for t in items if isinstance(t, torch.Tensor)]


class _Runner:
    """Fresh seeded inputs and forward calls on the probe's device."""

    def __init__(self, model: torch.nn.Module, module: types.ModuleType, filename: str,
                 device: torch.device) -> None:
        self.model, self.module, self.filename, self.device = model, module, filename, device

    def inputs(self, seed: int) -> list[torch.Tensor]:
        torch.manual_seed(seed)
        raw = _call(self.filename, "calling get_inputs()", self.module.get_inputs)
        return [t.to(self.device) for t in _check_inputs(raw)]

    def call(self, args: Sequence[torch.Tensor]) -> Any:
        return _call(self.filename, "running Model.forward", lambda: self.model(*args))

    def forward(self, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        args = [t.clone() for t in inputs]  # a forward that mutates its inputs stays repeatable
        with torch.no_grad():
            return _check_outputs(self.call(args))

    def run_seed(self, seed: int) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        inputs = self.inputs(seed)
        return inputs, self.forward(inputs)


# ---------------------------------------------------------------- sensitivity


def _check_sensitivity(runner: _Runner, first_inputs: list[torch.Tensor],
                       first_out: list[torch.Tensor], seeds: int, result: ProbeResult) -> None:
    """Fail unless the output is repeatable for equal inputs and moves with different ones."""
    again = runner.forward(first_inputs)
    drift = relative_change(first_out, again)
    if drift > NONDETERMINISTIC_REL:
        raise ProbeFailure("nondeterministic", f"the same inputs gave outputs differing by "
                           f"{drift:.2e} (relative): random ops in forward (dropout in training "
                           "mode, torch.rand) make every candidate unverifiable")
    changes, same_inputs, previous = [], True, (first_inputs, first_out)
    for seed in range(1, max(seeds, 2)):
        inputs, out = runner.run_seed(seed)
        same_inputs = same_inputs and equal_tensors(previous[0], inputs)
        changes.append(relative_change(previous[1], out))
        previous = (inputs, out)
    if same_inputs:
        raise ProbeFailure("degenerate", "get_inputs() returns the same tensors for every seed: "
                           "a candidate could cache its answer; build inputs with torch.randn or "
                           "torch.rand so each seed gives fresh ones")
    perturbation = relative_change(first_out, runner.forward(perturbed(first_inputs)))
    result.input_sensitivity = max(changes)
    if max(result.input_sensitivity, perturbation) < DEGENERATE_REL:
        raise ProbeFailure("degenerate", degenerate_message(
            first_out, result.input_sensitivity, perturbation, len(changes) + 1))


def _finite_warning(out: list[torch.Tensor]) -> str:
    total = sum(t.numel() for t in out)
    bad = sum(int((~torch.isfinite(t)).sum()) for t in out if t.is_floating_point())
    if total and bad == total:
        raise ProbeFailure("non_finite", "every output element is NaN or Inf: correctness "
                           "cannot be checked (e.g. log of negative inputs)")
    return f"warning: {bad} of {total} output elements are NaN or Inf" if bad else ""


# ---------------------------------------------------------------- timing and description


def _time_forward(runner: _Runner, inputs: list[torch.Tensor], budget_s: float) -> float:
    samples: list[float] = []
    deadline = time.perf_counter() + max(budget_s, 0.0)
    runner.forward(inputs)  # warm-up (the sensitivity calls warmed caches already)
    while len(samples) < MAX_TIMED_CALLS:
        samples.append(_timed_call(runner, inputs))
        if len(samples) >= MIN_TIMED_CALLS and time.perf_counter() > deadline:
            break
        if time.perf_counter() > deadline + budget_s:  # one call longer than the budget
            break
    return statistics.median(samples)


def _timed_call(runner: _Runner, inputs: list[torch.Tensor]) -> float:
    args = [t.clone() for t in inputs]
    if runner.device.type == "cuda":
        start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        torch.cuda.synchronize(runner.device)
        with torch.no_grad():
            start.record()
            runner.call(args)
            end.record()
        torch.cuda.synchronize(runner.device)  # work the forward put on other streams counts
        return float(start.elapsed_time(end))
    begin = time.perf_counter()
    with torch.no_grad():
        runner.call(args)
    return (time.perf_counter() - begin) * 1000.0


def _device(name: str) -> torch.device:
    try:
        device = torch.device(name)
    except RuntimeError as exc:
        raise ProbeFailure("device", f"unknown device {name!r}: use cpu, cuda or cuda:N") from exc
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ProbeFailure("device", f"device {name!r} asked for, but torch "
                               f"{torch.__version__} sees no CUDA GPU: use --device cpu")
        index = device.index or 0
        if index >= torch.cuda.device_count():
            raise ProbeFailure("device", f"no GPU {index}: {torch.cuda.device_count()} visible")
        device = torch.device("cuda", index)
        torch.cuda.set_device(device)
    elif device.type != "cpu":
        raise ProbeFailure("device", f"device {name!r} is not supported: use cpu or cuda")
    return device


def _describe(device: torch.device) -> DeviceInfo:
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return {"type": "cuda", "index": device.index, "name": props.name,
                "capability": f"{props.major}.{props.minor}",
                "memory_gib": round(props.total_memory / 2**30, 1)}
    return {"type": "cpu", "name": platform.processor() or platform.machine(),
            "threads": torch.get_num_threads()}


def _versions() -> dict[str, str]:
    cudnn = torch.backends.cudnn.version()  # type: ignore[no-untyped-call]
    return {"python": platform.python_version(), "torch": torch.__version__,
            "cuda": torch.version.cuda or "", "cudnn": str(cudnn or "")}


def _spec(t: torch.Tensor) -> TensorSpec:
    return TensorSpec(shape=list(t.shape), dtype=str(t.dtype).removeprefix("torch."),
                      device=str(t.device))


def _jsonable(value: object) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, torch.Tensor):
        return f"tensor{list(value.shape)} {str(value.dtype).removeprefix('torch.')}"
    return repr(value)[:80]


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# ---------------------------------------------------------------- command line


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    with contextlib.redirect_stdout(sys.stderr):
        yield


def main(argv: Sequence[str]) -> int:
    if len(argv) not in (1, 2):
        print("usage: python -m cudal1_evaluator.trusted.problem_probe JOB.json [RESULT.json]",
              file=sys.stderr)
        return 2
    job = ProbeJob.from_json(Path(argv[0]).read_text(encoding="utf-8"))
    with _stdout_to_stderr():
        result = run_probe(job)
    if len(argv) == 2:
        Path(argv[1]).write_text(result.to_json(), encoding="utf-8")
    else:
        print(result.to_json())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
