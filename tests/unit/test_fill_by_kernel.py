"""The referee fills a GPU runner's slots by elementwise kernels (``referee.copy_words``),
which take turns with another process's kernels, never by the copy engines: bit for bit,
whatever the dtype and dense layout (checked here on the CPU, where the same ops run)."""

from __future__ import annotations

import pytest
import torch

from cudal1_evaluator.parent.timing_checks import honest_fill_ms
from cudal1_evaluator.trusted.referee import copy_words


def _bits(t: torch.Tensor) -> bytes:
    return bytes(torch.as_strided(t, (t.numel(),), (1,)).contiguous().view(torch.uint8).tolist())


@pytest.mark.parametrize("make", [
    lambda: torch.tensor([float("nan"), -0.0, float("inf"), 1e-45, 3.0]),
    lambda: torch.randn(7, dtype=torch.float16),  # 14 bytes: int16 words
    lambda: torch.randn(3, 5).t(),  # dense, permuted
    lambda: torch.randint(-9, 9, (4, 4), dtype=torch.int8),
    lambda: torch.tensor([True, False, True]),
    lambda: torch.randn(2, 3, dtype=torch.complex64),
    lambda: torch.randn(4, 6, 8).permute(2, 0, 1),
], ids=["specials", "half-odd", "transposed", "int8", "bool", "complex", "permuted"])
def test_a_word_copy_is_bit_for_bit(make) -> None:  # type: ignore[no-untyped-def]
    src = make()
    dst = torch.empty_strided(src.shape, src.stride(), dtype=src.dtype)
    assert copy_words(dst, src)
    assert _bits(dst) == _bits(src)


def test_layouts_that_differ_are_left_to_torch() -> None:
    src = torch.randn(4, 6)
    assert not copy_words(torch.empty(6, 4).t(), src)  # other strides
    assert not copy_words(torch.empty(4, 6, dtype=torch.float64), src)  # other dtype
    strided = torch.randn(4, 12)[:, ::2]
    assert not copy_words(torch.empty_strided((4, 6), strided.stride()), strided)  # not dense
    assert not copy_words(torch.empty(0), torch.empty(0))


def test_the_honest_fill_of_as_many_sets_else_the_line_from_the_empty_fills() -> None:
    fills = {0: [0.2, 0.3, 0.2], 16: [1.8, 2.2, 2.0]}
    assert honest_fill_ms(fills, 16) == 2.0
    assert honest_fill_ms(fills, 32) == pytest.approx(0.2 + 1.8 * 2)
    assert honest_fill_ms(fills, 8) == pytest.approx(0.2 + 1.8 / 2)
    assert honest_fill_ms({0: [0.2]}, 8) == 0.0  # no honest fill of any sets yet: no credit
    assert honest_fill_ms({}, 8) == 0.0


def test_conjugate_and_negative_views_are_left_to_torch() -> None:
    """A conjugate or negative view's bits are not its values (torch resolves them in
    ``copy_``): never copied as words."""
    z = torch.randn(4, dtype=torch.complex64)
    assert not copy_words(torch.empty_like(z), z.conj())
    assert not copy_words(torch.empty_like(z), torch._neg_view(z))
