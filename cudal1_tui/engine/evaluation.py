"""The seam to the evaluator: gate + evaluation of a candidate, and the problem probe.

Candidate and problem code run only in evaluator subprocesses, never here.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from cudal1_tui.evaluation import evaluate_job
from evaluator.launch import probe as launch_probe
from evaluator.schema import Job, ProbeJob, ProbeResult, Result

Progress = Callable[[str, int, int, str], None]


def evaluate(job: Job, on_progress: Progress | None, cancel: threading.Event) -> Result:
    """The static gate first (a ``reject`` finding stops the candidate), then the evaluator."""
    return evaluate_job(job, gate=True, on_progress=on_progress, cancel=cancel)


def probe(job: ProbeJob) -> ProbeResult:
    return launch_probe(job)
