"""The build-only child: import the candidate so its extensions compile into the keyed build dir.

Runs in the same sandbox as the worker (scrubbed environment, limits, private temp dir) and
computes the same build key, so a later evaluation of the same job finds the build cached. It
opens no device: with ``Job.cuda_arch`` set, ``TORCH_CUDA_ARCH_LIST`` names the target and the
GPU is not asked; without it, only the arch is read from the device (as torch would).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import torch

from evaluator import build, envinfo, integrity
from evaluator.harness import describe_exception, load_source
from evaluator.schema import BuildOutcome, Job


def build_dir_of(job: Job, device: torch.device) -> build.BuildDir:
    """The candidate's keyed build dir (caches pointed into it), as the worker and this
    build-only child both compute it."""
    arch = build.job_arch(job.cuda_arch) or envinfo.arch_tag(device)
    return build.prepare(job.build_dir, job.candidate_source, torch.__version__, arch)


def run(job: Job) -> BuildOutcome:
    try:
        bdir = build_dir_of(job, torch.device(job.device))
    except Exception as exc:
        return BuildOutcome(ok=False, status="runtime_error",
                            message=f"cannot prepare the build dir: {describe_exception(exc)}")
    if bdir.cached:
        return BuildOutcome(ok=True, cached=True, message="already built")
    workdir = Path(tempfile.mkdtemp(prefix="eval-build-"))
    # the worker's guard, as during its build phase: the candidate's module-level code may
    # write only into its own build dir and the temp dir, and spawns no processes of its own
    guard = integrity.install_guards([str(bdir.path), str(workdir)])
    started = time.monotonic()
    try:
        module = load_source("cudal1_candidate", job.candidate_source, workdir)
    except BaseException as exc:
        refused = _refused(guard, exc)
        if refused is not None:
            return refused
        message = describe_exception(exc, limit=200_000).replace(str(bdir.path), "<build>")
        log = build.trim_compile_log(message)
        return BuildOutcome(ok=False, status="compile_error", compile_log=log,
                            compile_time_s=round(time.monotonic() - started, 3),
                            message=build.headline(log) or type(exc).__name__)
    elapsed = round(time.monotonic() - started, 3)
    if not isinstance(getattr(module, "ModelNew", None), type):
        return BuildOutcome(ok=False, status="compile_error", compile_time_s=elapsed,
                            message="the candidate defines no class ModelNew")
    refused = _refused(guard)
    if refused is not None:
        return refused
    bdir.mark_complete()
    return BuildOutcome(ok=True, compile_time_s=elapsed, message=f"built in {elapsed:.1f} s")


def _refused(guard: integrity.Guard, exc: BaseException | None = None) -> BuildOutcome | None:
    """A build the guard refused (or that raised PermissionError): not a compile error, so
    the evaluation still runs and the worker gives the verdict with its reasons."""
    reasons = [f"{f.code}: {f.reason}" for f in guard.findings() if f.severity == "reject"]
    if reasons:
        why = "; ".join(reasons)
    elif isinstance(exc, PermissionError):
        why = describe_exception(exc)
    else:
        return None
    return BuildOutcome(ok=False, status="runtime_error",
                        message=f"blocked by the evaluator: {why}")
