"""The raw report a child sends to its parent (stdlib only).

It carries measurements, not a verdict: the parent recomputes the status, the
timing summaries, the speedup and the reward from these raw data itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Literal

from cudal1_evaluator.schema import Flag, TrialReport, _from_dict, _object, _objects
from cudal1_evaluator.verdict_details import (
    DeviceInfo,
    ProfileSummary,
    SettingsChanged,
    ToleranceInfo,
)

# "blocked": the runtime guard refused a call from candidate code (a verdict: rejected)
ErrorKind = Literal["", "compile", "runtime", "setup", "blocked"]


@dataclass
class RawTiming:
    samples_ms: list[float] = field(default_factory=list)
    clock: str = ""
    late: int = 0  # CUDA calls whose work outlived the timing stream (counted in full)


@dataclass
class Recheck:
    """Timed calls checked: outputs compared with the reference on the same inputs, and
    outputs failed uncompared (written after the window, moved after the seal); never a
    reused call's output that did not fail (nothing of it was judged)."""

    compared: int = 0
    mismatches: int = 0
    detail: str = ""


@dataclass
class WorkerReport:
    phase: str = "start"
    error_kind: ErrorKind = ""
    error: str = ""
    compile_log: str = ""
    compile_time_s: float = 0.0
    build_cached: bool = False
    trials: list[TrialReport] = field(default_factory=list)
    tolerance: ToleranceInfo = field(default_factory=ToleranceInfo)
    flags: list[Flag] = field(default_factory=list)
    settings_changed: SettingsChanged = field(default_factory=dict)
    timing: dict[str, RawTiming] = field(default_factory=dict)
    recheck: Recheck = field(default_factory=Recheck)
    profile: ProfileSummary | None = None
    device: DeviceInfo = field(default_factory=DeviceInfo)
    versions: dict[str, str] = field(default_factory=dict)
    busy_s: float = 0.0  # the child's own wall time, to bound the sum of its samples
    phases: dict[str, float] = field(default_factory=dict)  # seconds per phase (benchmarks)

    def add_flags(self, flags: list[Flag]) -> None:
        """Append ``flags``, keeping one of each (code, reason)."""
        seen: dict[tuple[str, str], Flag] = {}
        for flag in self.flags + flags:
            seen.setdefault((flag.code, flag.reason), flag)
        self.flags = list(seen.values())

    def fail(self, kind: ErrorKind, message: str) -> None:
        if not self.error_kind:
            self.error_kind, self.error = kind, message

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> WorkerReport:
        data = dict(data)
        trials = [_from_dict(TrialReport, t) for t in _objects(data.pop("trials", None))]
        flags = [_from_dict(Flag, f) for f in _objects(data.pop("flags", None))]
        timing = {k: _from_dict(RawTiming, v)
                  for k, v in _object(data.pop("timing", None)).items() if isinstance(v, dict)}
        recheck = _from_dict(Recheck, _object(data.pop("recheck", None)))
        report = _from_dict(cls, data)
        report.trials, report.flags, report.timing, report.recheck = trials, flags, timing, recheck
        return report
