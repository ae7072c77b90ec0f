"""The build-only child: import the candidate so its extensions compile into the keyed build dir.

Runs in the same sandbox as the worker (scrubbed environment, limits, private temp dir) and
computes the same build key, so a later evaluation of the same job finds the build cached. It
opens no device: with ``Job.cuda_arch`` set, ``TORCH_CUDA_ARCH_LIST`` names the target and the
GPU is not asked; without it, only the arch is read from the device (as torch would).
Extensions built lazily (in ``ModelNew.__init__``, or by a ``load_inline`` in ``forward`` with
literal arguments) are built here too: see ``cudal1_evaluator.candidate_side.lazy_builds``.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from types import ModuleType

import torch

from cudal1_evaluator.candidate_side import (
    build_failures,
    integrity,
    lazy_builds,
    stable_sources,
)
from cudal1_evaluator.common.harness import describe_exception, load_source
from cudal1_evaluator.parent import build_cache as build
from cudal1_evaluator.schema import BuildOutcome, Job
from cudal1_evaluator.trusted import envinfo


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
    stable_sources.install(bdir.path)  # the worker will build from the same paths
    failures = build_failures.install()  # builds the candidate's own code survives
    # the worker's guard, as during its build phase: the candidate's module-level code may
    # write only into its own build dir and the temp dir, and spawns no processes of its own
    guard = integrity.install_guards([str(bdir.path), str(workdir)])
    started = time.monotonic()
    try:
        module = load_source("cudal1_candidate", job.candidate_source, workdir)
    except BaseException as exc:
        return _refused(guard, exc) or _compile_error(exc, bdir, started)
    if not isinstance(getattr(module, "ModelNew", None), type):
        return BuildOutcome(ok=False, status="compile_error", compile_time_s=_since(started),
                            message="the candidate defines no class ModelNew")
    try:
        note = _build_lazy(job, module, workdir)
    except BaseException as exc:
        return _refused(guard, exc) or _compile_error(exc, bdir, started)
    refused = _refused(guard)
    if refused is not None:
        return refused
    bdir.mark_complete()
    elapsed = _since(started)
    return BuildOutcome(ok=True, compile_time_s=elapsed,
                        message=f"built in {elapsed:.1f} s{note}{bdir.note()}"
                                f"{_failed_note(failures)}")


def _failed_note(failures: build_failures.BuildFailures) -> str:
    """Builds that failed while the import went on (the candidate's own fallback): the
    evaluation runs the module as it is and gives the verdict."""
    if not failures.seen:
        return ""
    return f"; failed builds the candidate went on without: {'; '.join(failures.seen[:3])}"


def _since(started: float) -> float:
    return round(time.monotonic() - started, 3)


def _compile_error(exc: BaseException, bdir: build.BuildDir, started: float) -> BuildOutcome:
    message = describe_exception(exc, limit=200_000).replace(str(bdir.path), "<build>")
    log = build.trim_compile_log(message)
    return BuildOutcome(ok=False, status="compile_error", compile_log=log,
                        compile_time_s=_since(started),
                        message=build.headline(log) or type(exc).__name__)


def _build_lazy(job: Job, module: ModuleType, workdir: Path) -> str:
    """Build what ``ModelNew.__init__`` and literal ``load_inline`` calls in methods build.
    Build errors propagate; other failures of the CPU-side construction are left for the
    evaluation to report (it constructs ModelNew again, on the device), and noted here."""
    calls = lazy_builds.build_calls_in_functions(module, job.candidate_source)
    notes = [f"; built ahead from methods: {', '.join(calls.built)}"] if calls.built else []
    if calls.failed:
        notes.append(f"; build(s) in methods failed ahead ({', '.join(calls.failed)}): left to "
                     "the evaluation, which runs the module as it is")
    if calls.skipped:
        notes.append(f"; {calls.skipped} build call(s) with run-time arguments left to the "
                     "evaluation")
    try:
        problem = load_source("cudal1_build_problem", job.problem_source, workdir)
        lazy_builds.construct(module, problem)
    except BaseException as exc:
        if build.looks_like_build_error(str(exc)) or isinstance(exc, PermissionError):
            raise
        notes.append(f"; ModelNew(...) on the CPU raised {type(exc).__name__} (left to the "
                     "evaluation)")
    return "".join(notes)


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
