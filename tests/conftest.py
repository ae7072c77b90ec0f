"""Shared fixtures. Add yours below; keep each one documented."""

from __future__ import annotations

import os
import signal
import socket
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch_pch
from heavy_list import HEAVY_LIST, heavy_tests

from cudal1_tui.replay import ReplayConfig, ReplayServer, Reply

# A suite started with SIGINT ignored (a background job of a non-interactive shell, `nohup`)
# hands that to every child it starts, and the tests that stop a child with Ctrl-C would see
# it ignore them. With a handler here, each child starts with Ctrl-C at its default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)



@pytest.fixture(autouse=True)
def _one_thread_per_child(monkeypatch: pytest.MonkeyPatch) -> None:
    """Children inherit OMP_NUM_THREADS=1 (the scrubbed environment keeps OMP_*). The suite
    shares a 2-core CI box with other jobs: one intra-op thread per child keeps OpenMP
    barriers from turning a descheduled thread into 20-30 ms calls (which would end timing
    after ``min_samples`` rounds, before call-count caches show themselves), and with torch
    on one thread the thread budget has nothing to match (``thread_budget``: no fourth runner
    in every evaluation). Tests of the thread budget set their own count."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")


# Read by rich and Textual when a console or an app is made: a user's or a CI's own choice
# (NO_COLOR, FORCE_COLOR=1 for coloured logs) that the tests' expected text and snapshots do
# not follow (FORCE_COLOR put escape codes in the CLI's captured output; NO_COLOR drew every
# snapshot without colour).
_TERMINAL_CHOICES = ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")


@pytest.fixture(autouse=True)
def _plain_terminal_choices(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test (and each child it starts) sees no colour choice from the environment;
    a test of one sets its own."""
    for name in _TERMINAL_CHOICES:
        monkeypatch.delenv(name, raising=False)


_PCH = pytest.StashKey[str]()
SLOW_TEST_S = 60.0


def pytest_configure(config: pytest.Config) -> None:
    """The suite's C++ builds use a precompiled torch header (``torch_pch``)."""
    config.stash[_PCH] = torch_pch.install()


def pytest_report_header(config: pytest.Config) -> list[str]:
    heavy = "run" if _runs_heavy(config) else "left out (pytest --full runs them)"
    return [f"precompiled torch/extension.h: {config.stash.get(_PCH, 'not built')}",
            f"heavy tests ({HEAVY_LIST.name}): {heavy}"]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--full", action="store_true",
                     help=f"also run the heavy tests ({HEAVY_LIST.name})")


def _runs_heavy(config: pytest.Config) -> bool:
    """The heavy tests run with ``--full``, under any ``-m`` expression (``pytest -m gpu`` on
    a GPU machine), and when named one by one (``path::test``)."""
    return bool(config.getoption("--full") or config.option.markexpr
                or any("::" in arg for arg in config.args))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the tests listed in ``heavy_tests.txt`` ``heavy``, and leave them out of a plain
    run: the whole suite takes more than CI's 90 minutes on its 2-core box."""
    listed = heavy_tests()
    for item in items:
        if item.nodeid in listed:
            item.add_marker(pytest.mark.heavy)
    if _runs_heavy(config):
        return
    heavy = [item for item in items if item.nodeid in listed]
    if heavy:
        config.hook.pytest_deselected(items=heavy)
        items[:] = [item for item in items if item.nodeid not in listed]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """A failure's report as it happens, and each test slower than ``SLOW_TEST_S`` as it ends:
    a suite that a time limit cuts short (CI's, a GPU run's) keeps what it saw so far (its
    summary never comes). ``CUDAL1_FAILURES_NOW=0`` keeps both quiet."""
    if os.environ.get("CUDAL1_FAILURES_NOW") == "0":
        return
    if report.failed:
        sys.stderr.write(f"\n=== FAILED {report.nodeid} ({report.when})\n"
                         f"{report.longreprtext[-6000:]}\n")
    elif report.duration > SLOW_TEST_S:  # a module fixture's evaluation counts in setup
        sys.stderr.write(f"\n=== slow: {report.duration:.0f} s {report.nodeid} "
                         f"({report.when})\n")
    sys.stderr.flush()


# Two scripted replies in the generation protocol, each with reasoning.
REPLAY_REPLIES: tuple[Reply, ...] = (
    Reply(
        content="## Performance Analysis\nThe diagonal matrix is materialised.\n\n"
        "## Algorithm Design\nBroadcast multiply.\n\n## Code Implementation\n"
        "```python\nimport torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n\n"
        "    def forward(self, a, b):\n        return a.unsqueeze(1) * b\n```\n",
        reasoning="diag(A) @ B scales the rows of B; no n x n matrix is needed.",
    ),
    Reply(
        content="## Performance Analysis\nSecond idea.\n\n## Algorithm Design\nSame.\n\n"
        "## Code Implementation\n```python\nclass ModelNew:\n    pass\n```\n",
        reasoning="A second, shorter answer.",
    ),
)


@pytest.fixture
def replay_replies() -> tuple[Reply, ...]:
    """The replies ``replay_server`` serves by default, in order."""
    return REPLAY_REPLIES


@pytest.fixture
def replay_server() -> Iterator[Callable[..., ReplayServer]]:
    """Start real replay servers on ephemeral ports: ``replay_server(latency_s=0.01, ...)``.

    Keyword arguments are ``ReplayConfig`` fields; ``replies`` defaults to ``REPLAY_REPLIES``
    unless a ``source`` is given. Every server started is stopped after the test.
    """
    started: list[ReplayServer] = []

    def start(**fields: Any) -> ReplayServer:
        if "source" not in fields:
            fields.setdefault("replies", REPLAY_REPLIES)
        server = ReplayServer(ReplayConfig(**fields))
        server.start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def closed_port_url() -> str:
    """A base URL on 127.0.0.1 where nothing listens (a port just bound and released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"
