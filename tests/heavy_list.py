"""The heavy tests a plain ``pytest`` leaves out (``heavy_tests.txt``): read by the root
conftest and checked by ``tests/unit/test_heavy_list.py``."""

from __future__ import annotations

from pathlib import Path

HEAVY_LIST = Path(__file__).with_name("heavy_tests.txt")


def heavy_tests() -> set[str]:
    """The node ids in ``heavy_tests.txt`` (one a line; ``#`` starts a comment)."""
    lines = HEAVY_LIST.read_text().splitlines()
    return {line.split("#", 1)[0].strip() for line in lines} - {""}
