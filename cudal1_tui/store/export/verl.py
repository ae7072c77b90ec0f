"""``verl``: parquet rows for verl's RL trainers (one per model candidate).

Columns: ``data_source`` ("cudal1-tui/<problem>"), ``prompt`` (list<struct<role,
content>>), ``ability`` ("cuda-optimization"), ``reward_model`` ({style: "rule",
ground_truth: <reference code>}), ``extra_info`` ({split, index, session_id, record_id,
speedup, speedup_strict, precision, reward}). ``verl_reward.compute_score`` reads the logged
reward back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypedDict

from cudal1_tui.errors import ExportError
from cudal1_tui.store.export.common import (
    ChatTurn,
    ExportOptions,
    PrecisionColumns,
    SessionData,
    has_completion,
    precision_columns,
    prompt_of,
    selected,
)

EXTENSION = "parquet"
ABILITY = "cuda-optimization"


class RewardModel(TypedDict):
    style: str
    ground_truth: str


class ExtraInfo(PrecisionColumns):
    split: str
    index: int
    session_id: str
    record_id: str
    speedup: float | None
    reward: float


class VerlRow(TypedDict):
    data_source: str
    prompt: list[ChatTurn]
    ability: str
    reward_model: RewardModel
    extra_info: ExtraInfo


def _rows(sessions: list[SessionData], options: ExportOptions) -> list[VerlRow]:
    rows: list[VerlRow] = []
    for data in sessions:
        for record in selected(data, options):
            if not has_completion(record):
                continue
            rows.append({
                "data_source": f"cudal1-tui/{data.problem_name}",
                "prompt": prompt_of(record),
                "ability": ABILITY,
                "reward_model": {"style": "rule", "ground_truth": data.reference_source},
                "extra_info": {"split": "train", "index": len(rows),
                               "session_id": data.session_id, "record_id": record.record_id,
                               "speedup": record.speedup, **precision_columns(record),
                               "reward": float(record.reward)},
            })
    return rows


def _schema() -> Any:
    try:
        import pyarrow as pa
    except ImportError:
        raise ExportError("the verl format needs pyarrow",
                          fix="pip install 'pyarrow>=15'   # the [export] extra: "
                          "pip install 'cudal1-tui[export]'") from None
    message = pa.struct([("role", pa.string()), ("content", pa.string())])
    return pa.schema([
        ("data_source", pa.string()),
        ("prompt", pa.list_(message)),
        ("ability", pa.string()),
        ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
        ("extra_info", pa.struct([
            ("split", pa.string()), ("index", pa.int64()), ("session_id", pa.string()),
            ("record_id", pa.string()), ("speedup", pa.float64()),
            ("speedup_strict", pa.float64()), ("precision", pa.string()), ("reward", pa.float64()),
        ])),
    ])


def write(sessions: list[SessionData], options: ExportOptions, path: Path) -> int:
    schema = _schema()
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = _rows(sessions, options)
    table = pa.Table.from_pylist(rows, schema=schema)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    pq.write_table(table, tmp)
    tmp.replace(path)
    return len(rows)
