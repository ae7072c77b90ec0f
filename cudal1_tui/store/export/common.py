"""What every exporter shares: options, the sessions' material, filters, writers."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypedDict

from cudal1_tui.records import CandidateRecord
from cudal1_tui.store.meta import SessionMeta
from cudal1_tui.store.rescoring import read_rescored, rescored_path
from cudal1_tui.store.session import Session

GOOD_SPEEDUP = 1.01  # CUDA-L1's threshold: below it a candidate is not an improvement


@dataclass
class ExportOptions:
    """Filters and choices shared by the formats.

    ``min_speedup`` None means the format's default (1.01 for ``openai-chat``, no filter
    elsewhere). ``rescored`` names a formula whose ``rescored-<formula>.jsonl`` (written by
    ``cudal1-tui rescore``) replaces the trace's rewards.
    """

    min_speedup: float | None = None
    only_accepted: bool = False
    with_reasoning: bool = False
    rescored: str = ""
    module_sizes: str = "measured"  # the module's sizes: "measured" (as timed) or "full"


@dataclass
class SessionData:
    """One session as exporters see it: records with decisions folded in."""

    session_id: str
    path: Path
    problem_name: str
    reference_source: str
    records: list[CandidateRecord]
    accepted: CandidateRecord | None
    meta: SessionMeta = field(default_factory=SessionMeta)


def load_session(session: Session, options: ExportOptions) -> SessionData:
    records = session.records()
    if options.rescored:
        scores = read_rescored(rescored_path(session.path, options.rescored))
        records = [replace(r, reward=scores.get(r.record_id, r.reward),
                           reward_formula=options.rescored) for r in records]
    accepted = session.accepted()
    if accepted is not None:
        accepted = next(r for r in records if r.record_id == accepted.record_id)
    return SessionData(session.id, session.path, session.meta.problem_name,
                       session.reference_source, records, accepted, session.meta)


def selected(
    data: SessionData, options: ExportOptions, default_min: float | None = None
) -> list[CandidateRecord]:
    """The records that pass ``--only-accepted`` and ``--min-speedup``, in trace order."""
    minimum = options.min_speedup if options.min_speedup is not None else default_min
    out = []
    for record in data.records:
        if options.only_accepted and record.decision != "accepted":
            continue
        if minimum is not None and not is_fast(record, minimum):
            continue
        out.append(record)
    return out


def is_fast(record: CandidateRecord, minimum: float) -> bool:
    return record.status == "ok" and record.speedup is not None and record.speedup >= minimum


def has_completion(record: CandidateRecord) -> bool:
    """A model answer with its prompt (built-in proposer candidates have neither)."""
    return bool(record.prompt_messages) and bool(record.raw_response.strip())


class ChatTurn(TypedDict):
    role: str
    content: str


def prompt_of(record: CandidateRecord) -> list[ChatTurn]:
    return [{"role": m.role, "content": m.content} for m in record.prompt_messages
            if m.role != "assistant"]


def completion_text(record: CandidateRecord, with_reasoning: bool) -> str:
    """The model's raw answer; with reasoning, prefixed as ``<think>…</think>``."""
    if with_reasoning and record.reasoning.strip():
        return f"<think>\n{record.reasoning.strip()}\n</think>\n\n{record.raw_response}"
    return record.raw_response


def assistant(record: CandidateRecord, with_reasoning: bool) -> ChatTurn:
    return {"role": "assistant", "content": completion_text(record, with_reasoning)}


def write_jsonl(path: Path, rows: Sequence[Mapping[str, object]]) -> None:
    """Write atomically: a half-written export never replaces a good one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


class PrecisionColumns(TypedDict):
    speedup_strict: float | None
    precision: str


def precision_columns(record: CandidateRecord) -> PrecisionColumns:
    """``speedup_strict`` (against strict fp32; None when equal to the speedup or unknown)
    and ``precision`` (the candidate's: fp32, tf32, fp16, bf16, mixed; "" in old traces)."""
    strict = record.result.speedup_strict
    label = record.result.precision.get("candidate", "")
    return {"speedup_strict": float(strict) if isinstance(strict, int | float) else None,
            "precision": str(label or "")}
