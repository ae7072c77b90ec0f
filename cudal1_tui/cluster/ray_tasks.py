"""What a Ray worker runs: the evaluator's own entry points, a job in and a result out.

Plain functions of JSON text (the evaluator's schema), so the result that comes back is the
one ``launch.evaluate`` made on the worker, field for field. The worker needs torch; the
evaluator package travels with the job (``runtime_env``'s ``py_modules``). Ray gives the task
its GPU through ``CUDA_VISIBLE_DEVICES``: there it is ``cuda``, and no other task times on it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterator
from pathlib import Path

OMP = "OMP_NUM_THREADS"


def _here(job_build_dir: str) -> str:
    """The driver's build dir when this node has it (one host, a shared disk), else the
    worker's default cache: a build cache is local to the node that compiles."""
    return job_build_dir if job_build_dir and Path(job_build_dir).parent.is_dir() else ""


@contextlib.contextmanager
def threads_as_asked(omp: str | None) -> Iterator[None]:
    """``OMP_NUM_THREADS`` as the asking process has it (None: unset) while the evaluator's
    children start: Ray sets it to the task's CPU count (1), which a local run does not, and
    torch's thread pool is part of what a candidate is measured with (and flagged for)."""
    before = os.environ.get(OMP)
    if omp is None:
        os.environ.pop(OMP, None)
    else:
        os.environ[OMP] = omp
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(OMP, None)
        else:
            os.environ[OMP] = before


def evaluate_task(job_json: str, omp: str | None) -> str:
    from cudal1_evaluator import launch
    from cudal1_evaluator.schema import Job

    job = Job.from_json(job_json)
    job = dataclasses.replace(job, build_dir=_here(job.build_dir or ""))
    with threads_as_asked(omp):
        return launch.evaluate(job).to_json()


def probe_task(job_json: str, omp: str | None) -> str:
    from cudal1_evaluator import launch
    from cudal1_evaluator.schema import ProbeJob

    with threads_as_asked(omp):
        return launch.probe(ProbeJob.from_json(job_json)).to_json()
