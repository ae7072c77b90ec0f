"""A verl custom reward function for rows written by ``cudal1-tui export --format verl``.

Point verl at it with ``custom_reward_function.path=<this file>`` and
``custom_reward_function.name=compute_score``.

It returns the reward that cudal1-tui measured and logged for the row's candidate
(``extra_info["reward"]``), not a fresh measurement of ``solution_str``: it suits
offline/replay uses of the data. A scorer that compiles, verifies and times new
completions with the evaluator is future work.
"""

from __future__ import annotations

from collections.abc import Mapping


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: str,
    extra_info: Mapping[str, object] | None = None,
) -> float:
    """The logged reward of the row's candidate; 0.0 when the row carries none."""
    if not data_source.startswith("cudal1-tui/") or not extra_info:
        return 0.0
    value = extra_info.get("reward")
    if not isinstance(value, int | float | str):
        return 0.0
    try:
        return float(value)
    except ValueError:
        return 0.0
