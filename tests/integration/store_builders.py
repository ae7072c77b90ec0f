"""Realistic sessions for store, git and export tests, built through the real Session API."""

from __future__ import annotations

from pathlib import Path

from cudal1_evaluator.reward import score
from cudal1_evaluator.schema import Flag, Result, TimingSummary, TrialReport
from cudal1_tui.config import Settings
from cudal1_tui.records import (
    CandidateRecord,
    ExemplarRef,
    Message,
    ParsedSections,
    SamplingSettings,
)
from cudal1_tui.store import Session, SessionMeta, new_record_id

REFERENCE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """Scales a linear layer's output."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.linear = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x) * 2.0


batch_size = 4
dim = 8


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [dim]
'''

CANDIDATE = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.linear = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.addmm(self.linear.bias * 2.0, x, self.linear.weight.t() * 2.0)
'''

SYSTEM = "You are an expert in writing CUDA kernels for PyTorch modules."


def timing(median: float) -> TimingSummary:
    samples = [median * f for f in (0.98, 0.99, 1.0, 1.0, 1.01, 1.03)]
    return TimingSummary(samples_ms=samples, median_ms=median, p10_ms=samples[0],
                         p90_ms=samples[-1], mean_ms=sum(samples) / len(samples),
                         spread=(samples[-1] - samples[0]) / median, n=len(samples),
                         clock="cuda_events")


def result(status: str, ref_ms: float = 2.0, cand_ms: float = 1.0) -> Result:
    ok = status == "ok"
    speedup = ref_ms / cand_ms if ok else None
    reward = score("clipped_speedup", {}, status, speedup).reward
    return Result(
        status=status,  # type: ignore[arg-type]
        correct=ok,
        speedup=speedup,
        reward=reward,
        message="" if ok else f"candidate {status}",
        flags=[] if ok else [Flag("output_mismatch", "max abs err 0.3 > 1e-4")],
        trials=[TrialReport(i, ok, max_abs_err=2e-6 * (i + 1), max_rel_err=1e-6)
                for i in range(3)],
        tolerance={"preset": "strict", "integers": "exact", "nan_inf": "positions must match",
                   "by_dtype": {"float32": {"atol": 1e-4, "rtol": 1e-4},
                                "float16": {"atol": 1e-2, "rtol": 1e-2}}},
        timing={"reference": timing(ref_ms), "candidate": timing(cand_ms)} if ok else {},
        compile_log="",
        device={"name": "NVIDIA H100 80GB HBM3", "capability": "9.0"},
        versions={"torch": "2.13.0", "cuda": "13.0", "python": "3.11.9"},
        job_id="job-1",
        wall_time_s=3.2,
    )


def prompt(round_: int) -> list[Message]:
    return [Message("system", SYSTEM),
            Message("user", f"# Task for CUDA optimization (round {round_})\n\n{REFERENCE}")]


def record(
    session: Session,
    round_: int,
    slot: int,
    *,
    status: str = "ok",
    ref_ms: float = 2.0,
    cand_ms: float = 1.0,
    source: str = "model",
    code: str = CANDIDATE,
) -> CandidateRecord:
    res = result(status, ref_ms, cand_ms)
    model = source == "model"
    analysis = f"The linear layer and the scale fuse into one GEMM (slot {slot})."
    return CandidateRecord(
        record_id=new_record_id(round_, slot),
        session_id=session.id,
        round=round_,
        slot=slot,
        source=source,
        problem_name=session.meta.problem_name,
        code=code,
        result=res,
        reward=res.reward,
        reward_formula="clipped_speedup",
        status=status,
        speedup=res.speedup,
        prompt_messages=prompt(round_) if model else [],
        exemplars=[ExemplarRef("r001s0-aaaaaa", 1.2, "ok", "best")] if model else [],
        model="cuda-l1-7b" if model else "",
        sampling=SamplingSettings(temperature=0.7) if model else None,
        raw_response=(f"## Performance Analysis\n{analysis}\n\n## Code Implementation\n"
                      f"```python\n{code}```\n") if model else "",
        reasoning=f"thinking about slot {slot}" if model else "",
        sections=ParsedSections(performance_analysis=analysis, code_implementation=code),
        started_at="2026-11-21T06:15:00+00:00",
        finished_at="2026-11-21T06:15:09+00:00",
    )


def new_session(root: Path, name: str = "scale_linear") -> Session:
    problem = root.parent / f"{name}.py"
    problem.write_text(REFERENCE)
    meta = SessionMeta(model="cuda-l1-7b", device={"name": "NVIDIA H100 80GB HBM3"},
                       versions={"torch": "2.13.0"})
    return Session.create(problem, REFERENCE, Settings(api_key="sk-secret-123456"), meta,
                          root=root)


def populated_session(root: Path) -> tuple[Session, dict[str, CandidateRecord]]:
    """Two rounds of two model slots plus a built-in candidate; one accept, one reject.

    r1s0 ok 2.0x (accepted), r1s1 incorrect (rejected), r1s2 builtin ok 1.25x,
    r2s0 ok 1.005x (below 1.01), r2s1 ok 4.0x (pending).
    """
    session = new_session(root)
    recs = {
        "r1s0": record(session, 1, 0, cand_ms=1.0),
        "r1s1": record(session, 1, 1, status="incorrect"),
        "r1s2": record(session, 1, 2, cand_ms=1.6, source="builtin:torch_compile"),
        "r2s0": record(session, 2, 0, cand_ms=2.0 / 1.005),
        "r2s1": record(session, 2, 1, cand_ms=0.5),
    }
    for rec in recs.values():
        session.append_candidate(rec)
    session.accept(recs["r1s0"].record_id)
    session.reject(recs["r1s1"].record_id)
    return session, recs
