"""The throughput of a headless run: candidates a minute, how busy each stage was, and
which stage held the run back (``--report-json``, and the caption of the summary table).

The bottleneck is read from utilisation: lanes busy most of the time mean the GPUs (the
evaluations) bound the run; build threads busy most of the time mean the CPU builds do;
otherwise the lanes waited for candidates, that is for the model server's replies (and for
each round's last reply: a round's evaluations start only when its replies are parsed).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from cudal1_evaluator.stats import quantile
from cudal1_tui.engine.fleet import Fleet
from cudal1_tui.records import CandidateRecord

BUSY = 0.75  # a stage busy this share of the wall time is the one the others wait for
SCHEMA = 1


@dataclass
class StageUse:
    busy_s: float
    share: float  # busy / (wall time × width)
    width: int


@dataclass
class Outcome:
    """One candidate of the run: what the benchmark compares between widths."""

    problem: str
    record_id: str
    source: str
    status: str
    speedup: float | None
    code_sha: str  # sha256 of the candidate's code, first 16 hex digits: the same code
    # across runs (a benchmark matches its corpus candidates by it)


def code_sha(code: str) -> str:
    return hashlib.sha256(code.encode("utf-8", "replace")).hexdigest()[:16]


@dataclass
class RunReport:
    schema: int
    where: str
    lanes: list[dict[str, object]]
    elapsed_s: float
    candidates: int
    timed: int  # candidates with a measured speedup
    per_minute: float
    generation_s: float  # model reply time, summed over candidates
    lanes_use: StageUse
    builds_use: StageUse
    bottleneck: str
    outcomes: list[Outcome] = field(default_factory=list)
    # each evaluation's own wall time (the evaluator's clock), s: n, median, p90, max
    evaluation_s: dict[str, float] = field(default_factory=dict)

    def caption(self) -> str:
        return (f"{self.candidates} candidate(s) in {self.elapsed_s:.0f} s: "
                f"{self.per_minute:.1f}/min on {self.where}; lanes busy "
                f"{self.lanes_use.share:.0%}, builds {self.builds_use.share:.0%}; "
                f"bottleneck: {self.bottleneck}")

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(asdict(self), indent=2), encoding="utf-8")


def _use(busy_s: float, elapsed_s: float, width: int) -> StageUse:
    share = busy_s / (elapsed_s * width) if elapsed_s > 0 and width > 0 else 0.0
    return StageUse(round(busy_s, 3), round(min(share, 1.0), 3), width)


def bottleneck(lanes: StageUse, builds: StageUse) -> str:
    if lanes.share >= BUSY:
        return "timing lanes (the evaluations themselves)"
    if builds.share >= BUSY:
        return "CPU builds"
    return f"model server and round barriers (lanes idle {1 - lanes.share:.0%})"


def _generation_s(record: CandidateRecord) -> float:
    value = (record.usage or {}).get("elapsed_s")
    return float(value) if isinstance(value, int | float) else 0.0


def build_report(fleet: Fleet, elapsed_s: float,
                 records: dict[str, list[CandidateRecord]]) -> RunReport:
    usage = fleet.usage()
    lanes = _use(sum(u.busy_s for u in usage), elapsed_s, len(usage))
    builds = _use(fleet.builds.busy_s, elapsed_s, fleet.builds.workers)
    outcomes = [Outcome(name, r.record_id, r.source, r.status, r.speedup, code_sha(r.code))
                for name, recs in records.items() for r in recs]
    count = len(outcomes)
    return RunReport(
        schema=SCHEMA, where=fleet.label,
        lanes=[{"device": u.device, "busy_s": round(u.busy_s, 3), "holds": u.evaluations,
                "busy_s_by_kind": {k: round(v, 3) for k, v in u.busy_by_kind.items()},
                "holds_by_kind": dict(u.holds_by_kind)}
               for u in usage],
        elapsed_s=round(elapsed_s, 3), candidates=count,
        timed=sum(o.speedup is not None for o in outcomes),
        per_minute=round(count * 60.0 / elapsed_s, 3) if elapsed_s > 0 else 0.0,
        generation_s=round(sum(_generation_s(r) for recs in records.values() for r in recs), 3),
        lanes_use=lanes, builds_use=builds, bottleneck=bottleneck(lanes, builds),
        outcomes=outcomes,
        evaluation_s=spread([r.result.wall_time_s for recs in records.values() for r in recs
                             if r.result.wall_time_s > 0]))


def spread(values: list[float]) -> dict[str, float]:
    """n, median, p90 and max of ``values`` (empty: {})."""
    if not values:
        return {}
    ordered = sorted(values)
    return {"n": len(ordered), "median": round(quantile(ordered, 0.5), 3),
            "p90": round(quantile(ordered, 0.9), 3), "max": round(ordered[-1], 3)}
