"""Versioned job and result contracts of the evaluator (stdlib only, no torch).

A job goes in as JSON, a result comes out as JSON. Both carry a ``version`` so
that traces written today can be read (and re-scored) by later releases.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal, TypeVar

JOB_VERSION = 1
RESULT_VERSION = 1
PROBE_VERSION = 1

Status = Literal["ok", "compile_error", "runtime_error", "incorrect", "timeout", "rejected"]
STATUSES: tuple[Status, ...] = (
    "ok",
    "compile_error",
    "runtime_error",
    "incorrect",
    "timeout",
    "rejected",
)
Severity = Literal["reject", "warn", "info"]
TOLERANCES: tuple[str, ...] = ("strict", "relaxed")  # a Job's correctness presets
DEVICES: tuple[str, ...] = ("cpu", "cuda")  # a Job's device: one of these or cuda:N

T = TypeVar("T")


def _from_dict(cls: type[T], data: dict[str, Any]) -> T:
    """Build a flat dataclass from a dict, ignoring keys it does not know."""
    names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    return cls(**{k: v for k, v in data.items() if k in names})


@dataclass
class RewardSpec:
    """Which reward formula to apply and with what parameters (see cudal1_evaluator.reward)."""

    name: str = "clipped_speedup"
    params: dict[str, float] = field(default_factory=dict)


@dataclass
class Job:
    """One candidate to evaluate against one problem."""

    problem_source: str
    candidate_source: str
    device: str = "cpu"
    job_id: str = ""
    problem_name: str = "problem"
    correctness_trials: int = 5
    tolerance: str = "strict"
    timing_budget_s: float = 10.0
    warmup: int = 3
    min_samples: int = 10
    max_samples: int = 200
    stable_rel_ci: float = 0.01
    timeout_s: float = 300.0
    memory_limit_mb: int | None = 16384
    cpu_time_limit_s: int | None = None
    build_dir: str | None = None
    compare_torch_compile: bool = False
    strict_threshold: float = 10.0
    strict: bool = False
    profile: bool = True
    reward: RewardSpec = field(default_factory=RewardSpec)
    cuda_arch: str = ""  # TORCH_CUDA_ARCH_LIST for builds (from the probe); "" = torch detects
    version: int = JOB_VERSION

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Job:
        data = dict(data)
        reward = data.pop("reward", None) or {}
        job = _from_dict(cls, data)
        job.reward = _from_dict(RewardSpec, reward)
        return job

    @classmethod
    def from_json(cls, text: str) -> Job:
        return cls.from_dict(json.loads(text))


@dataclass
class Flag:
    """An integrity finding. ``reject`` findings make the status ``rejected``."""

    code: str
    reason: str
    severity: Severity = "reject"


@dataclass
class TimingSummary:
    """Raw samples (milliseconds) and their summary."""

    samples_ms: list[float] = field(default_factory=list)
    median_ms: float = 0.0
    p10_ms: float = 0.0
    p90_ms: float = 0.0
    mean_ms: float = 0.0
    spread: float = 0.0  # (p90 - p10) / median
    n: int = 0
    clock: str = ""  # "cuda_events" or "perf_counter"


@dataclass
class TrialReport:
    """Correctness of one trial on one fresh input set."""

    trial: int
    ok: bool
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    message: str = ""


@dataclass
class Result:
    """The verdict on one job."""

    status: Status
    correct: bool = False
    speedup: float | None = None  # against the reference under the candidate's precision
    speedup_strict: float | None = None  # against strict fp32 (None: the same precision)
    precision: dict[str, Any] = field(default_factory=dict)
    reward: float = 0.0
    reward_formula: str = "clipped_speedup"
    reward_params: dict[str, float] = field(default_factory=dict)
    message: str = ""
    flags: list[Flag] = field(default_factory=list)
    trials: list[TrialReport] = field(default_factory=list)
    tolerance: dict[str, Any] = field(default_factory=dict)
    timing: dict[str, TimingSummary] = field(default_factory=dict)
    compile_log: str = ""
    compile_time_s: float = 0.0
    build_cached: bool = False
    strict_reevaluation: bool = False
    profile: dict[str, Any] | None = None
    settings_changed: dict[str, Any] = field(default_factory=dict)
    device: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    job_id: str = ""
    wall_time_s: float = 0.0
    version: int = RESULT_VERSION

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Result:
        data = dict(data)
        flags = [_from_dict(Flag, f) for f in data.pop("flags", [])]
        trials = [_from_dict(TrialReport, t) for t in data.pop("trials", [])]
        timing = {k: _from_dict(TimingSummary, v) for k, v in data.pop("timing", {}).items()}
        result = _from_dict(cls, data)
        result.flags, result.trials, result.timing = flags, trials, timing
        return result

    @classmethod
    def from_json(cls, text: str) -> Result:
        return cls.from_dict(json.loads(text))


BuildStatus = Literal["ok", "compile_error", "runtime_error", "timeout"]


@dataclass
class BuildOutcome:
    """What a build-only run (``cudal1_evaluator.launch.build``) did: the candidate imported in the
    sandbox so that its extensions compile into the keyed build dir; nothing timed."""

    ok: bool
    status: BuildStatus = "ok"
    compile_log: str = ""
    compile_time_s: float = 0.0
    cached: bool = False
    message: str = ""

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BuildOutcome:
        return _from_dict(cls, data)


@dataclass
class TensorSpec:
    shape: list[int]
    dtype: str
    device: str = "cpu"


@dataclass
class ProbeJob:
    """Execute a problem file once, in isolation, and describe it."""

    problem_source: str
    device: str = "cpu"
    problem_name: str = "problem"
    seeds: int = 3
    timing_budget_s: float = 3.0
    timeout_s: float = 120.0
    memory_limit_mb: int | None = 16384
    version: int = PROBE_VERSION

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str) -> ProbeJob:
        return _from_dict(cls, json.loads(text))


@dataclass
class ProbeResult:
    """What running the reference taught us, or why it could not run."""

    ok: bool
    message: str = ""
    error_kind: str = ""  # "", "raises", "non_tensor_output", "degenerate", "timeout", "crash"
    inputs: list[TensorSpec] = field(default_factory=list)
    init_inputs: list[Any] = field(default_factory=list)
    outputs: list[TensorSpec] = field(default_factory=list)
    parameter_count: int = 0
    reference_time_ms: float | None = None
    input_sensitivity: float | None = None  # relative output change across seeds
    device: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    version: int = PROBE_VERSION

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProbeResult:
        data = dict(data)
        inputs = [_from_dict(TensorSpec, t) for t in data.pop("inputs", [])]
        outputs = [_from_dict(TensorSpec, t) for t in data.pop("outputs", [])]
        result = _from_dict(cls, data)
        result.inputs, result.outputs = inputs, outputs
        return result

    @classmethod
    def from_json(cls, text: str) -> ProbeResult:
        return cls.from_dict(json.loads(text))
