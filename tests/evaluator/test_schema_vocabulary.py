"""The settings vocabulary the app validates with, and old result dicts loading as before."""

from __future__ import annotations

import json
from typing import get_args

import pytest

from cudal1_evaluator.common.compare import PRESETS
from cudal1_evaluator.reward import FORMULAS
from cudal1_evaluator.schema import (
    REWARDS,
    TOLERANCES,
    Flag,
    Result,
    RewardName,
    TolerancePreset,
    parse_device,
    parse_reward,
    parse_tolerance,
)


def test_vocabulary_matches_what_the_evaluator_implements() -> None:
    assert set(TOLERANCES) == set(PRESETS)
    assert set(REWARDS) == set(FORMULAS)
    assert get_args(TolerancePreset) == TOLERANCES and get_args(RewardName) == REWARDS


@pytest.mark.parametrize("text", ["cpu", "cuda", "cuda:0", "cuda:12", " cuda:1 "])
def test_parse_device_accepts_the_three_forms(text: str) -> None:
    assert parse_device(text) == text.strip()


@pytest.mark.parametrize(
    "text", ["tpu", "", "cuda:", "cuda:x", "cuda:-1", "CPU", "cuda:1.0", "cuda:\u0663"])
def test_parse_device_rejects_with_the_accepted_forms(text: str) -> None:
    with pytest.raises(ValueError, match=r"use cpu, cuda, cuda:N"):
        parse_device(text)


def test_an_old_result_dict_loads_and_unknown_keys_are_ignored() -> None:
    old = {
        "status": "rejected", "correct": False, "speedup": None, "reward": 0.0,
        "flags": [{"code": "input_mutation", "reason": "wrote x", "severity": "reject"}],
        "trials": [{"trial": 0, "ok": False, "max_abs_err": 1.0, "max_rel_err": 0.5,
                    "message": "m"}],
        "timing": {"reference": {"samples_ms": [1.0], "median_ms": 1.0, "n": 1, "clock": "x"}},
        "tolerance": {"preset": "strict"}, "device": {"type": "cpu"},
        "a_key_from_the_future": 3, "version": 1,
    }
    result = Result.from_dict(json.loads(json.dumps(old)))
    assert result.status == "rejected" and result.flags == [Flag("input_mutation", "wrote x")]
    assert result.trials[0].max_rel_err == 0.5 and result.timing["reference"].median_ms == 1.0
    assert result.tolerance == {"preset": "strict"} and result.device == {"type": "cpu"}
    assert Result.from_json(result.to_json()) == result


def test_tolerance_and_reward_names_parse_or_list_the_known_ones() -> None:
    assert [parse_tolerance(t) for t in TOLERANCES] == list(TOLERANCES)
    assert [parse_reward(r) for r in REWARDS] == list(REWARDS)
    with pytest.raises(ValueError, match="unknown tolerance preset 'loose': strict, relaxed"):
        parse_tolerance("loose")
    with pytest.raises(ValueError, match="unknown reward formula 'nope': clipped_speedup, "):
        parse_reward("nope")
