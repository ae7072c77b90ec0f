"""Versioned job and result contracts of the evaluator (stdlib only, no torch).

A job goes in as JSON, a result comes out as JSON. Both carry a ``version`` so
that traces written today can be read (and re-scored) by later releases.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal, TypeVar, cast, get_args

from cudal1_evaluator.verdict_details import (
    DeviceInfo,
    PrecisionInfo,
    ProfileSummary,
    SettingsChanged,
    ToleranceInfo,
)

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
SEVERITIES: tuple[Severity, ...] = ("reject", "warn", "info")

# The vocabulary of a job's settings, exported so the app validates its config with the same names.
TolerancePreset = Literal["strict", "relaxed"]
TOLERANCES = ("strict", "relaxed")  # get_args(TolerancePreset), spelled out for mypy
RewardName = Literal["clipped_speedup", "log_speedup", "binary", "speedup"]
REWARDS = ("clipped_speedup", "log_speedup", "binary", "speedup")  # get_args(RewardName)
DEVICE_FORMS: tuple[str, ...] = ("cpu", "cuda", "cuda:N")


def parse_device(text: str) -> str:
    """``cpu``, ``cuda`` or ``cuda:N`` (surrounding blanks dropped); anything else raises a
    ValueError that names the accepted forms."""
    device = text.strip()
    index = device.removeprefix("cuda:")
    if device in ("cpu", "cuda") or (index != device and index.isdigit() and index.isascii()):
        return device
    raise ValueError(f"bad device {text!r}: use {', '.join(DEVICE_FORMS)}")


def parse_tolerance(text: str) -> TolerancePreset:
    """A tolerance preset name, or a ValueError that lists the presets."""
    for name in get_args(TolerancePreset):
        if text == name:
            return cast(TolerancePreset, name)
    raise ValueError(f"unknown tolerance preset {text!r}: {', '.join(TOLERANCES)}")


def parse_reward(text: str) -> RewardName:
    """A reward formula name, or a ValueError that lists the formulas."""
    for name in get_args(RewardName):
        if text == name:
            return cast(RewardName, name)
    raise ValueError(f"unknown reward formula {text!r}: {', '.join(REWARDS)}")

T = TypeVar("T")


def _from_dict(cls: type[T], data: Mapping[str, object]) -> T:
    """Build a flat dataclass from a JSON object, ignoring keys it does not know."""
    names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    return cls(**{k: v for k, v in data.items() if k in names})


def _object(value: object) -> Mapping[str, object]:
    """A nested JSON object (absent, null or not an object: empty)."""
    return value if isinstance(value, dict) else {}


def _objects(value: object) -> list[Mapping[str, object]]:
    """The JSON objects of a list field (absent or null: none)."""
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []



# The verdict text for ``output_buffer_reused``, whether the parent saw an address come back
# or torch raised on an output overwritten by a later CUDA-graph replay.
OUTPUT_REUSED_MESSAGE = (
    "the candidate returns output memory that its next call overwrites or frees (the same "
    "buffer on every call, a CUDA graph's static output, torch.compile's reduce-overhead "
    "mode): a caller holding two results gets garbage; clone the output before returning it")

@dataclass
class RewardSpec:
    """Which reward formula to apply and with what parameters (see cudal1_evaluator.reward)."""

    name: str = "clipped_speedup"
    params: dict[str, float] = field(default_factory=dict)
    # what correct candidates with static outputs / a fallback earn (cudal1_evaluator.reward
    # RewardPolicy: {"static_outputs": "zero"|"full", "fallback": "zero"|"full"}; missing
    # keys take the defaults)
    policy: dict[str, str] = field(default_factory=dict)


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
    # the precision the timed runners start at, before the problem's own settings: "defaults"
    # (PyTorch's: cuDNN TF32 on, matmul TF32 off) or "strict" (strict fp32); correctness is
    # always judged against the strict fp32 reference
    baseline: str = "defaults"
    # a window's fixed cost taken off its wall time: "empty" (the reference's empty windows) or
    # "alone_intercept" (also what a window of calls pays once, from the reference-alone
    # windows of one call and of a full window; opt-in while it is measured on GPUs:
    # docs/benchmarks/evaluator.md)
    window_cost: str = "empty"
    version: int = JOB_VERSION

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> Job:
        data = dict(data)
        reward = _object(data.pop("reward", None))
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


# Flags that only say how a time was measured; whether one appears follows the clock and the
# machine's load (a cache's age, how noisy the windows were), not the candidate. Two runs of
# one candidate may differ in these and nothing else.
TIMING_NOTES = frozenset({"reference_pristine_reused", "reference_pristine_remeasured",
                          "reference_slowed", "speedup_within_noise", "window_once_cost",
                          "window_once_skipped", "windows_resized", "alone_unsettled",
                          "per_call_upper_bound"})


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
    # per call, the median wall time outside the timed calls (the parent's clock around each
    # burst, less the calls): what the wall-clock cross-check compares; None where not timed so
    outside_ms: float | None = None
    # most of its windows read their floor (the credits reached half a window's wall time):
    # the time a call is then an upper bound of the calls' own, fixed costs kept in it
    at_floor: bool = False


SpeedupBound = Literal["at_least", ""]
SPEEDUP_BOUND_WORDS = {"at_least": "at least "}  # a bound said in words (verdict, prompt)


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
    precision: PrecisionInfo = field(default_factory=PrecisionInfo)
    reward: float = 0.0
    reward_formula: str = "clipped_speedup"
    reward_params: dict[str, float] = field(default_factory=dict)
    reward_policy: dict[str, str] = field(default_factory=dict)  # the policy applied
    message: str = ""
    flags: list[Flag] = field(default_factory=list)
    trials: list[TrialReport] = field(default_factory=list)
    tolerance: ToleranceInfo = field(default_factory=ToleranceInfo)
    timing: dict[str, TimingSummary] = field(default_factory=dict)
    compile_log: str = ""
    compile_time_s: float = 0.0
    build_cached: bool = False
    strict_reevaluation: bool = False
    profile: ProfileSummary | None = None
    settings_changed: SettingsChanged = field(default_factory=dict)
    device: DeviceInfo = field(default_factory=DeviceInfo)
    versions: dict[str, str] = field(default_factory=dict)
    job_id: str = ""
    wall_time_s: float = 0.0
    version: int = RESULT_VERSION

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def speedup_bound(self) -> SpeedupBound:
        """``at_least`` when the candidate's time a call is an upper bound (most of its
        windows read their floor) and the reference's is not: the fixed costs kept in the
        candidate's time pull the speedup down, so the calls' own times give at least this
        (the independent harness's speedup was at or above ours on 13 of 13 such corpus
        pairs). No mark the other way round: a reference at its floor beside a candidate of
        many launches read 0.47x against 0.62x, no bound either way."""
        ref, cand = self.timing.get("reference"), self.timing.get("candidate")
        if ref is None or cand is None or ref.at_floor or not cand.at_floor:
            return ""
        return "at_least"

    def to_dict(self) -> dict[str, Any]:  # JSON out: the stored form
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> Result:
        """From the stored form; results written by earlier versions load (unknown keys are
        ignored, missing ones take their defaults)."""
        data = dict(data)
        flags = [_from_dict(Flag, f) for f in _objects(data.pop("flags", None))]
        trials = [_from_dict(TrialReport, t) for t in _objects(data.pop("trials", None))]
        timing = {k: _from_dict(TimingSummary, v)
                  for k, v in _object(data.pop("timing", None)).items() if isinstance(v, dict)}
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
    def from_dict(cls, data: Mapping[str, object]) -> BuildOutcome:
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
    device: DeviceInfo = field(default_factory=DeviceInfo)
    versions: dict[str, str] = field(default_factory=dict)
    version: int = PROBE_VERSION

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> ProbeResult:
        data = dict(data)
        inputs = [_from_dict(TensorSpec, t) for t in _objects(data.pop("inputs", None))]
        outputs = [_from_dict(TensorSpec, t) for t in _objects(data.pop("outputs", None))]
        result = _from_dict(cls, data)
        result.inputs, result.outputs = inputs, outputs
        return result

    @classmethod
    def from_json(cls, text: str) -> ProbeResult:
        return cls.from_dict(json.loads(text))
