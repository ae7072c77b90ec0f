"""Fixtures for the UI tests: a tiny CPU problem, a local model server, settings."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import ui_problems
from ui_helpers import engine_settings

from cudal1_tui.config import Settings
from cudal1_tui.replay import ReplayConfig, ReplayServer, Reply


@pytest.fixture(autouse=True)
def idle_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """Screens must not depend on this host's load: the busy-machine notice reads the load
    average, so the UI tests see an idle machine (tests/unit/test_uncertainty.py covers the
    notice itself)."""
    monkeypatch.setattr("os.getloadavg", lambda: (0.0, 0.0, 0.0))


@pytest.fixture
def problem_file(tmp_path: Path) -> Path:
    return ui_problems.write_problem(tmp_path)


@pytest.fixture
def replay() -> Iterator[ReplayServer]:
    config = ReplayConfig(replies=(Reply(ui_problems.REPLY, ui_problems.REASONING),),
                          chunk_chars=40)
    with ReplayServer(config) as server:
        yield server


@pytest.fixture
def settings(tmp_path: Path, replay: ReplayServer) -> Settings:
    return engine_settings(tmp_path, replay.base_url)
