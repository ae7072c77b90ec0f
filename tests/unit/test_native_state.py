"""Snapshots of state Python identities do not show (``candidate_side.native_state``), each change
made and undone inside the test process."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator

import pytest
import torch
from torch.overrides import TorchFunctionMode

from cudal1_evaluator.candidate_side import integrity, native_state


def changed(change: Callable[[], Callable[[], None]]) -> dict[str, str]:
    """Codes -> reasons of the findings after ``change`` (which returns its undo)."""
    before = native_state.snapshot()
    undo = change()
    try:
        return {f.code: f.reason for f in native_state.diff(before, native_state.snapshot())
                if f.severity == "reject"}
    finally:
        undo()


def test_nothing_changed_means_no_findings() -> None:
    before = native_state.snapshot()
    torch.relu(torch.randn(4, 4) @ torch.randn(4, 4))
    assert [f for f in native_state.diff(before, native_state.snapshot())
            if f.severity == "reject"] == []


def test_python_kernel_override_of_an_aten_op() -> None:
    def override() -> Callable[[], None]:
        lib = torch.library.Library("aten", "IMPL")  # type: ignore[no-untyped-call]
        lib.impl("clone", lambda x, memory_format=None: x.new_zeros(x.shape),  # type: ignore[no-untyped-call]
                 "CPU")
        return lib._destroy

    found = changed(override)
    assert "aten::clone (CPU" in found["dispatcher_override"]


def test_global_forward_hook() -> None:
    def hook() -> Callable[[], None]:
        handle = torch.nn.modules.module.register_module_forward_hook(lambda m, i, o: o)
        return handle.remove

    assert "forward_hooks" in changed(hook)["global_module_hook"]


def test_autocast_left_on() -> None:
    def enable() -> Callable[[], None]:
        torch.set_autocast_enabled("cpu", True)
        return lambda: torch.set_autocast_enabled("cpu", False)

    assert "cpu" in changed(enable)["autocast_enabled"]


def test_signal_handler_and_itimer() -> None:
    def arm() -> Callable[[], None]:
        previous = signal.signal(signal.SIGUSR2, lambda *_: None)
        signal.setitimer(signal.ITIMER_VIRTUAL, 100.0)

        def undo() -> None:
            signal.setitimer(signal.ITIMER_VIRTUAL, 0)
            signal.signal(signal.SIGUSR2, previous)
        return undo

    found = changed(arm)
    assert "SIGUSR2" in found["signal_handler"]
    assert "ITIMER_VIRTUAL" in found["itimer"]


def test_torch_function_mode_left_active() -> None:
    def push() -> Callable[[], None]:
        mode = TorchFunctionMode()
        mode.__enter__()  # type: ignore[no-untyped-call]
        return lambda: mode.__exit__(None, None, None)  # type: ignore[no-untyped-call]

    assert "torch_mode_stack" in changed(push)


@pytest.fixture
def watched_extra() -> Iterator[None]:
    saved = set(native_state.WATCHED_OPS)
    yield
    native_state.WATCHED_OPS.clear()
    native_state.WATCHED_OPS.update(saved)


def test_threads_that_appear_are_named_in_an_info_finding() -> None:
    before = native_state.snapshot()
    release = threading.Event()
    started = threading.Thread(target=release.wait, name="cand-worker")
    started.start()
    try:
        found = native_state.diff(before, native_state.snapshot())
    finally:
        release.set()
        started.join()
    threads = [f for f in found if f.code == "native_threads"]
    assert len(threads) == 1 and threads[0].severity == "info"
    # Linux names a Python thread after its process (``comm``) unless it renames itself
    assert threads[0].reason.startswith("1 native thread(s) appeared (")
    assert before.threads and all(isinstance(name, str) for name in before.threads)


def test_ops_named_by_the_problem_are_watched(watched_extra: None) -> None:
    native_state.watch_ops_in_source("def forward(self, x):\n    return torch.cumsum(x, 0)\n")
    assert "cumsum" in native_state.WATCHED_OPS
    assert any(op.startswith("aten::cumsum") for op in native_state.snapshot().dispatcher)


def test_reached_through_the_globals_snapshot_api() -> None:
    before = integrity.snapshot_globals()
    handle = torch.nn.modules.module.register_module_forward_pre_hook(lambda m, i: None)
    try:
        codes = {f.code for f in integrity.diff_globals(before, integrity.snapshot_globals())}
    finally:
        handle.remove()
    assert "global_module_hook" in codes
