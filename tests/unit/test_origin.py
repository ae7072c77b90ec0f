"""Blame by origin (``candidate_side.origin`` through the guard): candidate code is its module, code
it compiled and files under its dirs; a library is never the candidate because of where it is
installed, and a library that only relays a forbidden call for candidate code is no cover."""

from __future__ import annotations

import gc
import importlib.util
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from cudal1_evaluator.candidate_side import integrity
from cudal1_evaluator.candidate_side.guard import Guard
from cudal1_evaluator.schema import Flag


def codes(flags: list[Flag]) -> set[str]:
    return {f.code for f in flags}


@pytest.fixture
def guard() -> Iterator[Guard]:
    g = integrity.install_guards(candidate_paths=[__file__])  # this file plays the candidate
    try:
        yield g
    finally:
        g.close()


@pytest.fixture
def library(tmp_path: Path) -> Iterator[tuple[Guard, ModuleType]]:
    """A guard, and a library module outside site-packages (as with pip --target)."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "relay_library.py").write_text(
        "import subprocess, sys, threading, time\n"
        "def _nap(): time.sleep(0.2)\n"
        "def work():\n"
        "    subprocess.run(['uname'], check=True, capture_output=True)\n"
        "    t = threading.Thread(target=_nap)\n"
        "    t.start()\n"
        "    return t\n"
        "def caller_name():\n"
        "    return sys._getframe(1).f_code.co_name\n"
        "def relay(function, *args):\n"
        "    return function(*args)\n"
        "def relabelled_wrapper(filename):\n"
        "    wrapper = lambda: None\n"
        "    wrapper.__code__ = wrapper.__code__.replace(co_filename=filename)\n"
        "    return wrapper\n"
        "def swap_code(function, code):\n"
        "    function.__code__ = code\n")
    spec = importlib.util.spec_from_file_location("relay_library", lib / "relay_library.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    g = integrity.install_guards(candidate_paths=[__file__])
    try:
        yield g, module
    finally:
        g.close()


def test_library_code_may_run_tools_and_thread_for_the_candidate(
        library: tuple[Guard, ModuleType]) -> None:
    guard, module = library
    guard.lock_down()
    module.work().join()
    assert guard.findings() == []


def test_a_library_outside_site_packages_is_not_the_candidate(tmp_path: Path) -> None:
    """Where a library is installed does not make it the candidate's (pip --target)."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "placed_lib.py").write_text(
        "import sys\ndef caller_name():\n    return sys._getframe(1).f_code.co_name\n")
    spec = importlib.util.spec_from_file_location("placed_lib", lib / "placed_lib.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with integrity.install_guards(candidate_paths=[__file__]) as g:
        g.lock_down()
        assert module.caller_name() == "test_a_library_outside_site_packages_is_not_the_candidate"
        assert g.findings() == []


def test_blame_laundering_through_a_library_is_refused(guard: Guard) -> None:
    """``tree_map(gc.get_referrers, ...)``: pytree never names get_referrers, it relays."""
    from torch.utils import _pytree

    guard.lock_down()
    with pytest.raises(PermissionError, match="blocked by the evaluator"):
        _pytree.tree_map(gc.get_referrers, [guard])
    with pytest.raises(PermissionError, match="blocked by the evaluator"):
        _pytree.tree_map(sys._getframe, [0])
    assert {"gc_walk", "frame_access"} <= codes(guard.findings())


def test_relayed_thread_running_candidate_code_is_refused(
        library: tuple[Guard, ModuleType]) -> None:
    guard, module = library
    guard.lock_down()
    thread = threading.Thread(target=time.sleep, args=(0.1,))
    with pytest.raises(PermissionError):
        module.relay(thread.start)
    assert "thread_spawned" in codes(guard.findings())


def test_library_may_grab_its_own_frames_for_the_candidate(
        library: tuple[Guard, ModuleType]) -> None:
    guard, module = library
    guard.lock_down()
    assert module.caller_name() == "test_library_may_grab_its_own_frames_for_the_candidate"
    with pytest.raises(PermissionError):
        module.relay(gc.get_objects)
    assert codes(guard.findings()) == {"gc_walk"}


def test_a_library_may_swap_the_code_of_its_own_functions_only(
        library: tuple[Guard, ModuleType]) -> None:
    """torch.compile(mode="reduce-overhead") relabels a wrapper Dynamo made itself (that is its
    business); a library handed a function to rewrite is only relaying for the candidate."""
    guard, module = library
    guard.lock_down()
    assert module.relabelled_wrapper(__file__).__code__.co_filename == __file__
    assert guard.findings() == []

    def victim() -> int:
        return 1

    with pytest.raises(PermissionError, match="replaces a function's code object"):
        module.swap_code(victim, (lambda: 2).__code__)
    assert codes(guard.findings()) == {"patching"}


def test_code_the_candidate_compiles_is_candidate_code(guard: Guard) -> None:
    code = compile("import gc\ngc.get_objects()\n", "<generated by the candidate>", "exec")
    with pytest.raises(PermissionError):
        exec(code, {})
    [flag] = [f for f in guard.findings() if f.code == "gc_walk"]
    assert "generated by the candidate" in flag.reason


def test_a_library_may_run_a_binary_it_ships_but_not_a_shell(tmp_path: Path) -> None:
    """Triton runs the ``ptxas`` inside its own package on the first launch: that is the
    library's own work. A shell started through the same library is still the candidate's."""
    site = tmp_path / "site-packages"
    (site / "shiplib" / "bin").mkdir(parents=True)
    tool = site / "shiplib" / "bin" / "assembler"
    tool.write_text("#!/bin/sh\nexit 0\n")
    tool.chmod(0o755)
    (site / "shiplib" / "__init__.py").write_text(
        "import pathlib, subprocess\n"
        "def assemble():\n"
        "    tool = pathlib.Path(__file__).parent / 'bin' / 'assembler'\n"
        "    subprocess.run([str(tool)], check=True)\n"
        "def run(argv):\n"
        "    subprocess.run(argv, check=True)\n")
    sys.path.insert(0, str(site))
    try:
        import shiplib  # type: ignore[import-not-found]

        with integrity.install_guards(candidate_paths=[__file__]) as g:
            g.lock_down()
            shiplib.assemble()
            assert g.findings() == []
            with pytest.raises(PermissionError, match="blocked by the evaluator"):
                shiplib.run(["sh", "-c", "true"])
            assert any(f.code == "process_spawned" and ": sh" in f.reason
                       for f in g.findings())
    finally:
        sys.path.remove(str(site))
        sys.modules.pop("shiplib", None)
