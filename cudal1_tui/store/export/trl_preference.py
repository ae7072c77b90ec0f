"""``trl-preference``: ``prompt``/``chosen``/``rejected`` rows for DPO-style training.

Pairs come from candidates answering the same prompt (same session and prompt messages,
i.e. the slots of one round). The chosen one wins by the user's decision (accepted over
rejected; ``pair_reason`` "decision") or else by a strictly higher reward ("reward").
Answers to different prompts are never paired: DPO compares completions of one prompt.
``--only-accepted`` and ``--min-speedup`` filter the chosen side.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import TypedDict

from cudal1_tui.records import CandidateRecord
from cudal1_tui.store.export.common import (
    ChatTurn,
    ExportOptions,
    SessionData,
    assistant,
    has_completion,
    prompt_of,
    selected,
    write_jsonl,
)

EXTENSION = "jsonl"


def _reason(a: CandidateRecord, b: CandidateRecord) -> str:
    """Why ``a`` is preferred over ``b`` ("" when it is not)."""
    if a.decision == "accepted" and b.decision == "rejected":
        return "decision"
    if b.decision == "accepted" and a.decision == "rejected":
        return ""
    return "reward" if a.reward > b.reward else ""


def _groups(data: SessionData) -> list[list[CandidateRecord]]:
    by_prompt: dict[str, list[CandidateRecord]] = defaultdict(list)
    for record in data.records:
        if has_completion(record):
            key = repr([(m["role"], m["content"]) for m in prompt_of(record)])
            by_prompt[key].append(record)
    return [g for g in by_prompt.values() if len(g) > 1]


class PreferenceRow(TypedDict):
    prompt: list[ChatTurn]
    chosen: list[ChatTurn]
    rejected: list[ChatTurn]
    chosen_reward: float
    rejected_reward: float
    chosen_speedup: float | None
    rejected_speedup: float | None
    pair_reason: str
    problem_name: str
    chosen_record_id: str
    rejected_record_id: str
    session_id: str


def _row(data: SessionData, chosen: CandidateRecord, rejected: CandidateRecord, reason: str,
         options: ExportOptions) -> PreferenceRow:
    return {
        "prompt": prompt_of(chosen),
        "chosen": [assistant(chosen, options.with_reasoning)],
        "rejected": [assistant(rejected, options.with_reasoning)],
        "chosen_reward": float(chosen.reward),
        "rejected_reward": float(rejected.reward),
        "chosen_speedup": chosen.speedup,
        "rejected_speedup": rejected.speedup,
        "pair_reason": reason,
        "problem_name": data.problem_name,
        "chosen_record_id": chosen.record_id,
        "rejected_record_id": rejected.record_id,
        "session_id": data.session_id,
    }


def pairs(data: SessionData, options: ExportOptions) -> list[PreferenceRow]:
    eligible = {r.record_id for r in selected(data, options)}
    rows = []
    for group in _groups(data):
        for chosen in group:
            if chosen.record_id not in eligible:
                continue
            for other in group:
                reason = _reason(chosen, other) if other is not chosen else ""
                if reason:
                    rows.append(_row(data, chosen, other, reason, options))
    return rows


def write(sessions: list[SessionData], options: ExportOptions, path: Path) -> int:
    rows = [row for data in sessions for row in pairs(data, options)]
    write_jsonl(path, rows)
    return len(rows)
