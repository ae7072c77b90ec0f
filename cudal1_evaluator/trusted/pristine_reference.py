"""The pristine-reference child: times the reference in a process that never saw the candidate.

Same protocol as the worker (fresh inputs per round, cold cache, the same clock).
With ``compare_torch_compile``, the reference under ``torch.compile`` is timed here
too, interleaved with the eager reference.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from cudal1_evaluator.common.harness import Harness, SetupError, describe_exception, plan_of
from cudal1_evaluator.common.timing import Call, interleaved
from cudal1_evaluator.schema import Flag, Job
from cudal1_evaluator.trusted import envinfo
from cudal1_evaluator.wire.channel import WorkerChannel
from cudal1_evaluator.wire.report import RawTiming, WorkerReport


def _compiled(h: Harness, model: torch.nn.Module, report: WorkerReport) -> Any:
    try:
        compiled = torch.compile(model)
        call = h.caller(compiled)
        with h.no_grad():
            call(h.make_inputs())  # compile now, outside the timing
        h.clock.sync()
        return call
    except Exception as exc:
        report.flags.append(Flag("torch_compile_failed",
                                 f"torch.compile of the reference failed: "
                                 f"{describe_exception(exc, limit=500)}", "info"))
        return None


def run(job: Job, channel: WorkerChannel) -> WorkerReport:
    report = WorkerReport(phase="setup")
    started = time.monotonic()
    try:
        h = Harness(job, baseline=job.baseline)
        report.device = envinfo.device_info(h.device)
        report.versions = envinfo.versions()
        model = h.reference_model()
        sides: dict[str, Call] = {"reference": h.caller(model)}
        if job.compare_torch_compile:
            channel.progress("reference", 0, 1, "torch.compile of the reference")
            compiled = _compiled(h, model, report)
            if compiled is not None:
                sides["torch_compile"] = compiled
        report.phase = "timing"
        with h.no_grad():
            samples = interleaved(
                h.clock, sides, h.make_inputs, plan_of(job),
                progress=lambda n, total: channel.progress("reference", n, total, ""),
            )
        report.timing = {k: RawTiming(v, h.clock.name) for k, v in samples.items()}
        report.phase = "done"
    except SetupError as exc:
        report.fail("setup", str(exc))
    except BaseException as exc:
        report.fail("runtime", describe_exception(exc))
    report.busy_s = round(time.monotonic() - started, 3)
    return report
