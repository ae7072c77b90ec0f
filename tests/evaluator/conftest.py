"""Evaluator tests share a 2-core CI box with other jobs: one intra-op thread per worker
keeps OpenMP barriers from turning a descheduled thread into 20 ms timing outliers."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _one_thread_per_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """Children inherit OMP_NUM_THREADS=1 (the scrubbed environment keeps OMP_*)."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
