"""Candidate proposers other than the model: the built-in strategies."""

from cudal1_tui.proposers.builtin import propose
from cudal1_tui.proposers.strategies.base import BuiltinCandidate

__all__ = ["BuiltinCandidate", "propose"]
