"""Recompute a session's rewards with another formula, from each record's raw timings.

The trace is never changed: scores go to ``rescored-<formula>.jsonl`` beside it, one row
per candidate (``record_id``, ``reward``, ``formula``, ``params``, ``speedup``, ``status``,
``old_reward``). Exports can use such a file instead of the trace's rewards.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from cudal1_evaluator import reward as rewards
from cudal1_tui.errors import SessionError
from cudal1_tui.measurements import noise_of, speedup_from_result
from cudal1_tui.records import CandidateRecord, JsonObject


@dataclass
class RescoredRow:
    record_id: str
    status: str
    speedup: float | None
    old_reward: float
    reward: float
    formula: str
    params: dict[str, float]

    def to_dict(self) -> JsonObject:
        return asdict(self)


def rescored_path(session_dir: Path, formula: str) -> Path:
    return session_dir / f"rescored-{formula}.jsonl"


def parse_params(pairs: list[str]) -> dict[str, float]:
    """``["max=5", "threshold=1.05"]`` -> ``{"max": 5.0, "threshold": 1.05}``."""
    params: dict[str, float] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        try:
            if not sep or not key.strip():
                raise ValueError
            params[key.strip()] = float(value)
        except ValueError:
            raise SessionError(f"bad --param {pair!r}: expected KEY=NUMBER",
                               fix="e.g. --param max=5 --param threshold=1.05") from None
    return params


def rescore(
    records: list[CandidateRecord], formula: str, params: Mapping[str, float]
) -> list[RescoredRow]:
    if formula not in rewards.FORMULAS:
        raise SessionError(f"unknown reward formula {formula!r}",
                           fix=f"use one of: {', '.join(sorted(rewards.FORMULAS))}")
    rows = []
    for record in records:
        status = record.result.status
        speedup = speedup_from_result(record.result) if status == "ok" else None
        if speedup is None and status == "ok":
            speedup = record.speedup
        scored = rewards.score(formula, params, status, speedup,
                               noise=noise_of(record.result))
        rows.append(RescoredRow(record.record_id, status, speedup, record.reward,
                                scored.reward, formula, dict(scored.params)))
    return rows


def write_rescored(path: Path, rows: list[RescoredRow]) -> None:
    """Write the whole file atomically; re-running a formula replaces its file."""
    tmp = path.with_suffix(".jsonl.tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row.to_dict()) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def read_rescored(path: Path) -> dict[str, float]:
    """record_id -> reward from a rescored file."""
    if not path.is_file():
        raise SessionError(f"no rescored file {path}",
                           fix=f"run `cudal1-tui rescore {path.parent.name} --formula F` first")
    out: dict[str, float] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            out[str(row["record_id"])] = float(row["reward"])
        except (json.JSONDecodeError, KeyError, TypeError, ValueError):
            raise SessionError(f"{path}:{number}: not a rescored row",
                               fix="re-run `cudal1-tui rescore`") from None
    return out
