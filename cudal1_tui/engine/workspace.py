"""What a round needs from the engine, in one place (shared by the round runner)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from cudal1_tui.config import Settings
from cudal1_tui.engine.events import EngineEvent
from cudal1_tui.engine.generate import ModelGateway
from cudal1_tui.engine.gpu_share import GpuShare, unshared
from cudal1_tui.engine.pool import EvalPool
from cudal1_tui.judging import JUDGE, Judge
from cudal1_tui.problem.model import ClassSignature, Inspection
from cudal1_tui.prompting import Templates
from cudal1_tui.records import CandidateRecord
from cudal1_tui.store.session import Session

Emit = Callable[[EngineEvent], None]


@dataclass
class Problem:
    name: str
    path: Path
    source: str  # the user's file as given (kept pristine as the session's problem.py)
    # What is evaluated, shown to the model and copied by built-ins: the same file, at
    # CPU sizes when those are used. The static gate compares a candidate's size
    # constants with the problem it is measured against, so prompts show those sizes.
    eval_source: str
    inspection: Inspection
    signature: ClassSignature | None  # Model's, for checking replies


@dataclass
class Workspace:
    settings: Settings
    session: Session
    problem: Problem
    device: str
    build_root: Path
    templates: Templates
    gateway: ModelGateway
    pool: EvalPool
    emit: Emit
    reference_ms: float | None = None
    cuda_arch: str = ""
    share: GpuShare = field(default_factory=unshared)  # the GPU shared with the model server
    judge: Judge = JUDGE
    cancel: threading.Event = field(default_factory=threading.Event)
    write_lock: threading.Lock = field(default_factory=threading.Lock)

    def records(self) -> list[CandidateRecord]:
        with self.write_lock:
            return self.session.records()

    def best(self) -> CandidateRecord | None:
        with self.write_lock:
            return self.session.best()

    def append(self, record: CandidateRecord) -> bool:
        with self.write_lock:
            return self.session.append_candidate(record)
