import math

import pytest

from cudal1_evaluator.reward import FORMULAS, score


def test_not_ok_is_zero_for_every_formula() -> None:
    for name in FORMULAS:
        for status in ("compile_error", "incorrect", "rejected", "timeout", "runtime_error"):
            assert score(name, {}, status, 50.0).reward == 0.0


def test_clipped_speedup_threshold_and_clip() -> None:
    assert score("clipped_speedup", {}, "ok", 1.005).reward == 0.0
    assert score("clipped_speedup", {}, "ok", 2.0).reward == pytest.approx(1.0)
    assert score("clipped_speedup", {"max": 5}, "ok", 60.0).reward == 5.0


def test_log_speedup_negative_for_slowdowns() -> None:
    assert score("log_speedup", {}, "ok", 0.5).reward == pytest.approx(math.log(0.5))
    assert score("log_speedup", {}, "ok", 2.0).reward == pytest.approx(math.log(2.0))


def test_params_are_echoed_for_rescoring() -> None:
    result = score("binary", {"threshold": 1.5}, "ok", 1.4)
    assert (result.reward, result.formula, result.params) == (0.0, "binary", {"threshold": 1.5})


def test_unknown_formula_lists_known_ones() -> None:
    with pytest.raises(KeyError, match="clipped_speedup"):
        score("nope", {}, "ok", 2.0)


def test_nonfinite_speedup_scores_zero() -> None:
    assert score("speedup", {}, "ok", float("inf")).reward == 0.0
    assert score("speedup", {}, "ok", None).reward == 0.0


def test_a_speedup_inside_the_noise_band_earns_nothing() -> None:
    within = score("clipped_speedup", {}, "ok", 1.04, noise=0.06)
    assert (within.reward, within.within_noise) == (0.0, True)
    beyond = score("clipped_speedup", {}, "ok", 1.5, noise=0.06)
    assert beyond.reward == pytest.approx(0.5) and not beyond.within_noise
    assert score("speedup", {}, "ok", 0.97, noise=0.05).reward == 1.0


def test_noise_band_from_samples() -> None:
    from cudal1_evaluator.reward import noise_band

    steady = [1.0] * 20
    assert noise_band(steady, steady) == 0.0
    noisy = [1.0, 1.2, 0.8, 1.1, 0.9, 1.05, 0.95, 1.15, 0.85, 1.0] * 2
    assert 0.05 < noise_band(noisy, steady) < 0.5
    assert noise_band([1.0, 2.0], steady) == 0.0  # too few samples: no band known
