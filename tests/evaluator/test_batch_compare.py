"""The referee's window check, batched: call for call the same answer as compare_outputs
and same_inputs (ok, both maximum errors and the message), on windows made to hit every
branch: passes, failures, values on the tolerance's edge, NaN/Inf placed alike and not,
overflow, several outputs, integer outputs, odd calls, and chunks smaller than a window."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from cudal1_evaluator.common import batch_compare
from cudal1_evaluator.common.batch_compare import compare_many, mutated_many
from cudal1_evaluator.common.compare import compare_outputs, same_inputs, tolerance_for


@pytest.fixture(autouse=True)
def _batched_on_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """The batched path runs on a GPU only; these tests hold it to the single path on CPU
    tensors."""
    monkeypatch.setattr(batch_compare, "BATCH_ON_CPU", True)


def test_cpu_windows_are_judged_one_call_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batch_compare, "BATCH_ON_CPU", False)
    pairs = [(torch.ones(3), torch.ones(3))] * 4
    assert batch_compare._signature(*pairs[0]) is None
    assert [r.ok for r in compare_many(pairs, "strict")] == [True] * 4


def _edge(e: torch.Tensor, tol: float, gen: torch.Generator) -> torch.Tensor:
    """Errors of about the allowed size: each element a little inside, on or beyond it."""
    allowed = tol * float(e.abs().max()) + tol * e.abs()
    scale = torch.tensor([0.999, 1.0, 1.001, 0.5, 2.0])[
        torch.randint(0, 5, e.shape, generator=gen)]
    sign = torch.where(torch.rand(e.shape, generator=gen) < 0.5, -1.0, 1.0)
    return (e + sign * scale.to(e.dtype) * allowed.to(e.dtype)).to(e.dtype)


def _window(gen: torch.Generator, dtype: torch.dtype, preset: str,
            calls: int = 24) -> list[tuple[Any, Any]]:
    tol = tolerance_for(preset, dtype)
    pairs: list[tuple[Any, Any]] = []
    for c in range(calls):
        e = (torch.randn(6, 5, generator=gen) * 10 ** float(c % 4 - 2)).to(dtype)
        kind = c % 9
        if kind == 0:
            g = e.clone()
        elif kind == 1:
            g = _edge(e, tol, gen)
        elif kind == 2:
            e[1, 2], e[3, 0] = float("nan"), float("inf")
            g = e.clone()
            g[0, 0] += tol * float(e[torch.isfinite(e)].abs().max()) * 0.5
        elif kind == 3:
            e[1, 2] = float("nan")
            g = e.clone()
            g[1, 2], g[2, 2] = 0.0, float("nan")  # NaN moved
        elif kind == 4:
            e[0, 1] = float("inf")
            g = e.clone()
            g[0, 1] = float("-inf")  # same position, another value
        elif kind == 5:
            g = e + 1.0  # plainly wrong
        elif kind == 6:
            e = e.to(torch.float32)
            g = torch.full_like(e, 3e38)
            e[0, 0] = -3e38  # overflow to inf in the difference
        elif kind == 7:
            g = (-0.0 * e).to(dtype) if float(e.abs().max()) == 0 else e.clone()
        else:
            g = _edge(e, tol, gen)
        pairs.append((e, g))
    return pairs


def _same(pairs: list[tuple[Any, Any]], preset: str, floor: float = 0.0) -> None:
    batched = compare_many(pairs, preset, floor)
    one_by_one = [compare_outputs(e, g, preset, floor) for e, g in pairs]
    assert len(batched) == len(pairs)
    for i, (b, o) in enumerate(zip(batched, one_by_one, strict=True)):
        assert (b.ok, b.max_abs_err, b.max_rel_err, b.message) == \
            (o.ok, o.max_abs_err, o.max_rel_err, o.message), f"call {i}"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("preset", ["strict", "relaxed"])
def test_a_window_is_judged_as_call_by_call(dtype: torch.dtype, preset: str) -> None:
    gen = torch.Generator().manual_seed(7)
    for _ in range(4):
        pairs = _window(gen, dtype, preset)
        _same(pairs, preset)
        _same(pairs, preset, floor=3e-3)  # the baseline's own distance from strict fp32


def test_chunks_smaller_than_a_window_change_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batch_compare, "CHUNK_BYTES", 700)  # a few calls a chunk
    gen = torch.Generator().manual_seed(3)
    _same(_window(gen, torch.float32, "strict", calls=40), "strict")


def test_several_outputs_odd_calls_and_integers() -> None:
    gen = torch.Generator().manual_seed(11)
    pairs: list[tuple[Any, Any]] = []
    for c in range(12):
        a, b = torch.randn(4, 3, generator=gen), torch.randn(7, generator=gen)
        got_b = b.clone() if c % 3 else b + 1.0  # the second output wrong in a third
        pairs.append(((a, b), (a * (1 + 1e-6), got_b)))
    pairs.append(((torch.ones(2), torch.ones(3)), (torch.ones(2), torch.ones(4))))  # shape
    pairs.append((torch.ones(3), torch.ones(3, dtype=torch.float16)))  # dtype
    pairs.append((torch.arange(5), torch.arange(5)))  # integers: exact
    pairs.append((torch.arange(5), torch.arange(5) + 1))
    pairs.append((torch.ones(3), [torch.ones(3), torch.ones(3)]))  # output count
    pairs.append((torch.ones(3), "not a tensor"))
    pairs.append((torch.empty(0), torch.empty(0)))
    pairs.append((torch.ones(2, 2), torch.ones(2, 2).t()))  # same values, another layout
    _same(pairs, "strict")


def test_mutated_inputs_are_found_as_call_by_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batch_compare, "CHUNK_BYTES", 500)
    gen = torch.Generator().manual_seed(5)
    inputs, originals = [], []
    for c in range(20):
        x, n = torch.randn(5, 4, generator=gen), torch.randint(0, 9, (6,), generator=gen)
        x[0, 0] = float("nan") if c % 4 == 0 else x[0, 0]
        now_x, now_n = x.clone(), n.clone()
        if c % 5 == 1:
            now_x[2, 1] += 1.0  # written in place
        if c % 7 == 2:
            now_n[0] += 1
        if c % 6 == 3:
            now_x[0, 0] = 0.5 if c % 4 == 0 else float("nan")  # a NaN written or replaced
        inputs.append([now_x, 3, now_n])
        originals.append([x, 3, n])
    expected = [[j for j in range(3) if not same_inputs([a[j]], [b[j]])]
                for a, b in zip(inputs, originals, strict=True)]
    assert mutated_many(inputs, originals) == expected
    assert any(expected) and not all(expected)
    assert mutated_many([], []) == []


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_an_error_exactly_on_the_threshold_passes_and_one_ulp_beyond_fails(
        dtype: torch.dtype) -> None:
    """Where the reference is 0 the threshold is tol * max|exp| alone: an error of exactly
    that (as compare_outputs forms it, in Python's double, then in the tensor's dtype)
    passes, the next representable value fails, in both paths alike."""
    gen = torch.Generator().manual_seed(1)
    pairs: list[tuple[Any, Any]] = []
    for c in range(16):
        e = torch.randn(8, generator=gen).to(dtype) * (c + 1)
        e[3] = 0.0
        edge = torch.tensor(1e-4 * float(e.abs().max()), dtype=dtype)
        g = e.clone()
        g[3] = edge if c % 2 else torch.nextafter(edge, torch.tensor(1.0, dtype=dtype))
        pairs.append((e, g))
    _same(pairs, "strict")
    assert [r.ok for r in compare_many(pairs, "strict")] == [c % 2 == 1 for c in range(16)]


def test_inputs_are_compared_bit_for_bit() -> None:
    """An infinity overwritten with the dtype's maximum, a zero's sign flipped, a NaN's
    payload changed: each is a write into the input (NaN-for-0.5 and == used to miss them)."""
    base = torch.tensor([float("inf"), 0.0, float("nan"), 1.0])
    payload = base.clone()
    payload.view(torch.int32)[2] ^= 1  # still a NaN, other bits
    cases = [(torch.tensor([torch.finfo(torch.float32).max, 0.0, float("nan"), 1.0]), True),
             (torch.tensor([float("inf"), -0.0, float("nan"), 1.0]), True),
             (payload, True), (base.clone(), False)]
    for now, changed in cases:
        assert same_inputs([now], [base]) is not changed
    assert mutated_many([[now] for now, _ in cases], [[base]] * len(cases)) == \
        [[0] if changed else [] for _, changed in cases]
    half = torch.tensor([float("inf")], dtype=torch.float16)
    assert not same_inputs([torch.tensor([65504.0], dtype=torch.float16)], [half])
    with pytest.raises(ValueError):
        mutated_many([[base], [base, base]], [[base], [base, base]])


def test_no_outputs_at_all_is_judged_as_before() -> None:
    _same([((), ())], "strict")


@pytest.mark.parametrize("chunk_bytes", [1, 700, batch_compare.CHUNK_BYTES])
def test_all_finite_chunks_take_the_short_judgement_and_agree(
        monkeypatch: pytest.MonkeyPatch, chunk_bytes: int) -> None:
    """A chunk whose every difference is finite is judged in fewer passes (one call a chunk
    included: its output viewed, not stacked), with the same answers; a chunk holding a NaN,
    an infinity or an overflowing difference is left to the full judgement."""
    monkeypatch.setattr(batch_compare, "CHUNK_BYTES", chunk_bytes)
    short = batch_compare.judge_finite_rows
    taken: list[bool] = []

    def spy(e: torch.Tensor, g: torch.Tensor, tol: float) -> Any:
        found = short(e, g, tol)
        taken.append(found is not None)
        return found

    monkeypatch.setattr(batch_compare, "judge_finite_rows", spy)
    gen = torch.Generator().manual_seed(13)
    tol = tolerance_for("strict", torch.float32)
    finite: list[tuple[Any, Any]] = []
    for c in range(18):
        e = torch.randn(6, 5, generator=gen) * 10 ** float(c % 3 - 1)
        g = e.clone() if c % 3 == 0 else _edge(e, tol, gen) if c % 3 == 1 else e + 1.0
        finite.append((e, g))
    _same(finite, "strict")
    assert taken and all(taken)
    assert any(not r.ok for r in compare_many(finite, "strict"))
    taken.clear()
    odd = [(torch.tensor([1.0, float("nan")]), torch.tensor([1.0, float("nan")])),
           (torch.tensor([3e38, 1.0]), torch.tensor([-3e38, 1.0])),
           (torch.tensor([1.0, 2.0]), torch.tensor([1.0, float("inf")]))]
    _same(odd, "strict")
    assert taken and not any(taken)
    assert [r.ok for r in compare_many(odd, "strict")] == [True, False, False]


def test_a_lone_call_is_checked_for_writes_without_a_copy(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batch_compare, "CHUNK_BYTES", 1)  # one call a chunk
    base = torch.randn(64)
    written = base.clone()
    written[5] = -written[5]
    assert mutated_many([[base.clone()], [written]], [[base], [base]]) == [[], [0]]
    assert batch_compare._rows([base]).data_ptr() == base.data_ptr()


def test_the_short_judgement_fails_closed_where_a_maximum_drops_nan(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The short judgement takes a finite maximum difference as "no NaN anywhere", which holds
    because PyTorch's maxima propagate NaN. Were a reduction to drop NaN, a NaN output must
    still fail: the threshold test itself fails on NaN."""
    real_amax = torch.Tensor.amax

    def nan_dropping_amax(self: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        return real_amax(torch.where(self.isnan(), float("-inf"), self), *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "amax", nan_dropping_amax)
    expected = torch.tensor([[1.0, 2.0, 3.0]])
    got = torch.tensor([[1.0, float("nan"), 3.0]])
    short = batch_compare.judge_finite_rows(expected, got, 1e-4)
    assert short is not None and short[0][0] is False
    assert not compare_outputs(expected, got, "strict").ok
    assert [r.ok for r in compare_many([(expected, got), (expected, expected.clone())],
                                       "strict")] == [False, True]
