"""The heavy-test list names tests that exist: a renamed test must not silently rejoin the
plain run (and push CI past its time limit) while its stale line stays behind."""

from __future__ import annotations

import re

from heavy_list import HEAVY_LIST, heavy_tests

ROOT = HEAVY_LIST.parents[1]


def test_every_heavy_entry_names_an_existing_test_function() -> None:
    entries = heavy_tests()
    assert len(entries) >= 10
    for node_id in entries:
        path, _, name = node_id.partition("::")
        function = re.sub(r"\[.*\]$", "", name)
        source = (ROOT / path).read_text()
        assert re.search(rf"^(async )?def {function}\(", source, re.M), node_id
