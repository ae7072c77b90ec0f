"""Speedup intervals, noise and precision labels: one implementation for CLI, TUI, exports."""

from __future__ import annotations

import pytest

from cudal1_evaluator.schema import Result, TimingSummary
from cudal1_tui.records import result_from_stored
from cudal1_tui.uncertainty import (
    interval_text,
    machine_busy,
    noise_warning,
    noisy,
    precision_text,
    speedup_interval,
)


def _result(ref: tuple[float, float, float], cand: tuple[float, float, float],
            **fields: object) -> Result:
    def summary(p10: float, median: float, p90: float) -> TimingSummary:
        return TimingSummary(p10_ms=p10, median_ms=median, p90_ms=p90,
                             spread=(p90 - p10) / median)

    return Result(status="ok", speedup=ref[1] / cand[1],  # type: ignore[arg-type]
                  timing={"reference": summary(*ref), "candidate": summary(*cand)},
                  **fields)


def test_the_interval_spans_the_worst_and_best_pairing() -> None:
    result = _result((1.92, 2.0, 2.08), (0.96, 1.0, 1.04))
    low, high = speedup_interval(result) or (0.0, 0.0)
    assert low == pytest.approx(1.92 / 1.04) and high == pytest.approx(2.08 / 0.96)
    assert interval_text(result) == "1.85–2.17×"
    assert not noisy(result) and noise_warning(result) == ""


def test_noisy_timings_are_called_so() -> None:
    result = _result((1.0, 2.0, 3.0), (0.95, 1.0, 1.05))
    assert noisy(result)
    assert "spread 100%" in noise_warning(result)


def test_old_results_have_no_interval_and_a_plain_label() -> None:
    old, bare = result_from_stored({"speedup": 1.5}, "ok"), result_from_stored({}, "ok")
    assert speedup_interval(old) is None and interval_text(bare) == ""
    assert precision_text(bare, 1.5) == "1.50×" and precision_text(bare, None) == "—"


def test_precision_is_named_with_the_strict_figure_beside() -> None:
    result = _result((1.9, 2.0, 2.1), (0.95, 1.0, 1.05), speedup_strict=1.1,
                     precision={"candidate": "tf32", "reference": "tf32", "settings": {}})
    assert precision_text(result, 1.8) == "1.80× tf32 (1.10× strict fp32)"


def test_a_speedup_that_is_a_bound_is_marked_wherever_it_is_shown() -> None:
    """The candidate's time an upper bound (it read its floor), the reference's not: the
    detail pane, the CLI and the exports mark the speedup with ≥, the table's cell too, the
    model's prompt in words; the reference at its floor is no bound."""
    from cudal1_tui.prompting.exemplar_items import Exemplar
    from cudal1_tui.prompting.render import format_exemplar
    from cudal1_tui.ui.display import DisplayOptions

    result = _result((1.9, 2.0, 2.1), (0.095, 0.1, 0.105))
    result.timing["candidate"].at_floor = True
    assert result.speedup_bound == "at_least" and precision_text(result, 20.0) == "≥20.00×"
    assert DisplayOptions().speedup(20.0, result.speedup_bound) == "≥20.00×"
    assert DisplayOptions(mask_measurements=True).speedup(20.0, "at_least") == "•.••×"
    result.timing["reference"].at_floor = True
    assert result.speedup_bound == "" and precision_text(result, 20.0) == "20.00×"
    result.timing["candidate"].at_floor = False
    assert result.speedup_bound == "" and precision_text(result, 20.0) == "20.00×"
    shown = Exemplar("r1", "code", 3.0, "ok", speedup_bound="at_least")
    assert format_exemplar(1, shown).startswith("## Implementation 1: speedup at least 3.00x")
    assert "speedup 3.00x" in format_exemplar(1, Exemplar("r2", "code", 3.0, "ok"))


def test_a_busy_machine_is_reported() -> None:
    assert machine_busy(load=9.5, cores=2).startswith("the machine is busy (load 9.5 on 2")
    assert machine_busy(load=0.5, cores=2) == ""
