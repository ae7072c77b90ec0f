"""``trl``: conversational prompt/completion rows with reward columns.

``prompt`` is the chat list, ``completion`` the assistant turn; ``reward``, ``speedup``,
``speedup_strict``, ``precision``, ``status``, ``reference_code``, ``problem_name``,
``record_id`` and ``session_id`` are extra columns (TRL's GRPO passes every extra column
to reward functions as a kwarg). Every model candidate is kept (failures carry reward 0)
unless filters say otherwise.
"""

from __future__ import annotations

from pathlib import Path

from cudal1_tui.records import CandidateRecord
from cudal1_tui.store.export.common import (
    ChatTurn,
    ExportOptions,
    PrecisionColumns,
    SessionData,
    assistant,
    has_completion,
    precision_columns,
    prompt_of,
    selected,
    write_jsonl,
)

EXTENSION = "jsonl"


class TrlRow(PrecisionColumns):
    prompt: list[ChatTurn]
    completion: list[ChatTurn]
    reward: float
    speedup: float | None
    status: str
    reference_code: str
    problem_name: str
    record_id: str
    session_id: str


def row(data: SessionData, record: CandidateRecord, options: ExportOptions) -> TrlRow:
    return {
        "prompt": prompt_of(record),
        "completion": [assistant(record, options.with_reasoning)],
        "reward": float(record.reward),
        "speedup": record.speedup,
        **precision_columns(record),
        "status": record.status,
        "reference_code": data.reference_source,
        "problem_name": data.problem_name,
        "record_id": record.record_id,
        "session_id": data.session_id,
    }


def write(sessions: list[SessionData], options: ExportOptions, path: Path) -> int:
    rows = [row(data, r, options) for data in sessions for r in selected(data, options)
            if has_completion(r)]
    write_jsonl(path, rows)
    return len(rows)
