"""Opening a session: read and inspect the problem, pick the device, probe, create or resume."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from cudal1_evaluator.isolation import lifetime
from cudal1_evaluator.parent.build_cache import default_build_dir
from cudal1_evaluator.schema import ProbeJob, ProbeResult
from cudal1_tui.config import Settings, build_dir, sessions_dir
from cudal1_tui.engine.device import resolve_device
from cudal1_tui.engine.events import ProbeFinished, SessionOpened, StageChanged
from cudal1_tui.engine.jobs import probe_job
from cudal1_tui.engine.orphans import reap_orphans
from cudal1_tui.engine.preflight import probe_failure
from cudal1_tui.engine.workspace import Emit, Problem
from cudal1_tui.errors import ProblemError
from cudal1_tui.judging import JUDGE
from cudal1_tui.problem.inspect import inspect_source
from cudal1_tui.problem.problem_file import read_source
from cudal1_tui.problem.signature import class_signature_of
from cudal1_tui.problem.sizing import shrink_for_cpu
from cudal1_tui.records import JsonObject
from cudal1_tui.store.meta import SessionMeta
from cudal1_tui.store.session import Session

log = logging.getLogger(__name__)

Sizes = Literal["auto", "full", "cpu"]


@dataclass
class Opened:
    session: Session
    problem: Problem
    device: str
    reference_ms: float | None
    resumed: bool
    cuda_arch: str = ""  # the GPU's compute capability: builds then never open the GPU
    probe: ProbeResult | None = None  # what the reference's probe measured


def eval_source(source: str, sizes: Sizes, device: str) -> str:
    """The problem at the sizes it is evaluated with (``auto``: CPU sizes on a CPU)."""
    if sizes == "cpu" or (sizes == "auto" and device == "cpu"):
        return shrink_for_cpu(source)
    return source


def _problem(path: Path, source: str, name: str, sizes: Sizes, device: str) -> Problem:
    inspection = inspect_source(source, str(path))
    if not inspection.ok:
        raise ProblemError(inspection.report(), fix=f"cudal1-tui inspect {path}")
    sized = eval_source(source, sizes, device)
    return Problem(name=name, path=path, source=source, eval_source=sized,
                   inspection=inspect_source(sized, str(path)),
                   signature=class_signature_of(source, "Model"))


Probe = Callable[[ProbeJob], ProbeResult]


def _probe(settings: Settings, problem: Problem, device: str, emit: Emit,
           probe: Probe) -> ProbeResult:
    emit(StageChanged(0, 0, "probing", f"running the reference on {device}"))
    return probe(probe_job(settings, problem_source=problem.eval_source,
                           problem_name=problem.name, device=device))


def _at_cpu_sizes(problem: Problem) -> bool:
    return problem.eval_source != problem.source


def _json_fields(info: Mapping[str, object]) -> JsonObject:
    """The scalar fields of a typed record, as the session's JSON stores them."""
    return {k: v for k, v in info.items() if v is None or isinstance(v, str | int | float)}


def sweep_leftovers(settings: Settings) -> None:
    """What a killed run left (evaluator children stopped when it died, its temp dirs, build
    locks), removed before ours run."""
    killed = reap_orphans()
    if killed:
        log.info("ended %d evaluator process(es) a killed run left", len(killed))
    swept = lifetime.sweep_stale([build_dir(settings), default_build_dir()])
    if swept.summary():
        log.info("%s", swept.summary())


def open_workspace(problem_path: Path, settings: Settings, resume: str | Path | None,
                   sizes: Sizes, emit: Emit, probe: Probe | None = None, *,
                   sweep: bool = True) -> Opened:
    """``probe`` runs the reference (default: here, ``JUDGE.probe``; a fleet's holds a lane).
    ``sweep=False``: a run of many problems swept once, before any of its children ran."""
    if sweep:
        sweep_leftovers(settings)
    session: Session | None = None
    try:
        # the session lock first: a session in use is refused before the slow parts
        if resume is not None:
            session = Session.open(resume, sessions_dir(settings))
        device = resolve_device(settings.device)
        if session is not None:
            path = Path(session.meta.problem_path or problem_path)
            problem = _problem(path, session.reference_source, session.meta.problem_name,
                               sizes, device)
        else:
            problem = _problem(problem_path, read_source(problem_path), problem_path.stem,
                               sizes, device)
        result = _probe(settings, problem, device, emit, probe or JUDGE.probe)
        if not result.ok:
            emit(ProbeFinished(False, result.message, None, None, device, result,
                               _at_cpu_sizes(problem)))
            raise probe_failure(problem.path, problem.name, result)
        if session is None:
            meta = SessionMeta(device={**_json_fields(result.device),
                                       "requested": settings.device, "used": device},
                               versions=result.versions,
                               extra={"sizes": sizes, "cpu_sizes": _at_cpu_sizes(problem)})
            session = Session.create(problem.path, problem.source, settings, meta)
    except BaseException:
        if session is not None:
            session.close()
        raise
    emit(SessionOpened(session.id, str(session.path), problem.name, resume is not None))
    emit(ProbeFinished(True, result.message or "ok", result.reference_time_ms, None, device,
                       result, _at_cpu_sizes(problem)))
    capability = result.device.get("capability") if device.startswith("cuda") else None
    return Opened(session, problem, device, result.reference_time_ms, resume is not None,
                  str(capability or ""), result)
