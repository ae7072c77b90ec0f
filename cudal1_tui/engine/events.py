"""Events the engine emits; the TUI and the headless runner only render these.

Every event is a frozen dataclass. Consumers dispatch on the type.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from cudal1_evaluator.schema import ProbeResult

Stage = Literal[
    "probing", "prompting", "generating", "parsing", "gating",
    "compiling", "verifying", "timing", "recording", "idle",
]
ChunkKind = Literal["reasoning", "content"]


@dataclass(frozen=True)
class SessionOpened:
    session_id: str
    path: str
    problem_name: str
    resumed: bool


@dataclass(frozen=True)
class ProbeFinished:
    ok: bool
    message: str
    reference_ms: float | None
    torch_compile_ms: float | None
    device: str
    details: ProbeResult | None = None  # None: the probe did not run
    cpu_sizes: bool = False  # the problem's inputs were shrunk to CPU sizes


@dataclass(frozen=True)
class RoundStarted:
    round: int
    slots: int  # candidates this round


@dataclass(frozen=True)
class StageChanged:
    round: int
    slot: int
    stage: Stage
    detail: str = ""
    done: int = 0
    total: int = 0


@dataclass(frozen=True)
class StreamChunk:
    round: int
    slot: int
    kind: ChunkKind
    text: str
    tokens: int = 0
    tokens_per_s: float = 0.0


@dataclass(frozen=True)
class CandidateFinished:
    """A candidate reached its verdict; ``record_id`` names its trace record."""

    round: int
    slot: int
    record_id: str
    source: str  # "model" or "builtin:<strategy>"
    status: str
    speedup: float | None
    reward: float
    flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class RoundFinished:
    round: int
    best_speedup: float | None
    cancelled: bool = False
    torch_compile_ms: float | None = None  # when this round measured torch.compile


@dataclass(frozen=True)
class EngineError:
    """Something failed outside a candidate (server down, store unwritable)."""

    message: str
    fix: str = ""
    round: int = 0
    recoverable: bool = True
    severity: Literal["error", "info"] = "error"  # info: a fact to act on, nothing failed


@dataclass(frozen=True)
class DecisionRecorded:
    record_id: str
    decision: Literal["accepted", "rejected", "undone"]
    commit: str = ""


EngineEvent = (
    SessionOpened | ProbeFinished | RoundStarted | StageChanged | StreamChunk
    | CandidateFinished | RoundFinished | EngineError | DecisionRecorded
)
