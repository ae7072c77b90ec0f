"""Runtime integrity checks, exercised in-process (this test file plays the candidate)."""

from __future__ import annotations

import collections
import contextlib
import gc
import importlib.util
import logging
import os
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from cudal1_evaluator.candidate_side import integrity, snapshots
from cudal1_evaluator.candidate_side.guard import Guard
from cudal1_evaluator.common import compare
from cudal1_evaluator.schema import Flag

TORCH_FILE = torch.__file__


def codes(flags: list[Flag]) -> set[str]:
    return {f.code for f in flags}


@pytest.fixture
def guard() -> Iterator[Guard]:
    g = integrity.install_guards(candidate_paths=[__file__])  # this file plays the candidate
    try:
        yield g
    finally:
        g.close()


def run_as_library(code: str) -> None:
    """Run ``code`` as if it were torch's own (its frames carry torch's file name); no guard
    may be active (a guard flags exactly this forgery)."""
    exec(compile(code, TORCH_FILE, "exec"), {})


# -- the guard ----------------------------------------------------------------------------------

def test_guard_refuses_and_records_before_lock_down(guard: Guard, tmp_path: Path) -> None:
    # import time included: a process started or a file written then is as harmful as later
    attacks: list[Callable[[], object]] = [gc.get_objects, lambda: sys._getframe(0),
               lambda: subprocess.run(["true"]), threading.Thread(target=time.sleep).start,
               lambda: open("/nonexistent-dir/x", "w")]  # noqa: SIM115
    for attack in attacks:
        with pytest.raises(PermissionError, match="blocked by the evaluator"):
            attack()
    found = codes(guard.findings())
    assert {"gc_walk", "frame_access", "process_spawned", "thread_spawned", "file_write"} <= found
    assert all(f.severity == "reject" and "test_integrity.py" in f.reason
               for f in guard.findings())


@pytest.mark.parametrize("attack", [
    lambda: gc.get_objects(),
    lambda: gc.get_referrers(object()),
    lambda: sys._getframe(1),
    lambda: sys._current_frames(),
    lambda: subprocess.run(["true"]),
    lambda: threading.Thread(target=print).start(),
    lambda: Path("/proc/self/mem").read_bytes(),
    lambda: sys.settrace(None),
])
def test_guard_blocks_after_lock_down(guard: Guard, attack: object) -> None:
    guard.lock_down()
    with pytest.raises(PermissionError, match="blocked by the evaluator"):
        attack()  # type: ignore[operator]
    assert guard.findings()


def test_frames_through_inspect_and_tracebacks_are_blocked(guard: Guard) -> None:
    import inspect
    guard.lock_down()
    with pytest.raises(PermissionError):
        inspect.currentframe()
    try:
        raise ValueError("x")
    except ValueError as exc:
        tb = exc.__traceback__
    with pytest.raises(PermissionError):
        _ = tb.tb_frame  # type: ignore[union-attr]


def test_file_writes_outside_temp_dir(guard: Guard, tmp_path: Path) -> None:
    guard.lock_down()
    (tmp_path / "ok.txt").write_text("inside the temp dir is fine")
    # the filesystem root: never a temp dir, wherever the checkout lies (CI may clone under /tmp)
    outside = Path(os.path.abspath(os.sep)) / "cudal1-guard-test-written-by-candidate.txt"
    with pytest.raises(PermissionError, match="outside its temp dir"):
        outside.write_text("no")
    assert not outside.exists()
    assert Path(__file__).read_text(encoding="utf-8")  # reading is fine


def test_stdlib_bookkeeping_is_not_flagged(guard: Guard) -> None:
    guard.lock_down()
    collections.namedtuple("Point", "x y")
    logging.getLogger("cudal1-test").warning("logging reads its caller's frame")
    try:
        raise ValueError("formatted, not walked")
    except ValueError:
        assert "formatted, not walked" in traceback.format_exc()
    assert guard.findings() == []


def test_walking_the_stack_through_traceback_is_blocked(guard: Guard) -> None:
    guard.lock_down()
    with pytest.raises(PermissionError):
        next(traceback.walk_stack(None))


def test_code_forging_a_library_filename_is_refused(guard: Guard) -> None:
    with pytest.raises(PermissionError):
        compile("x = 1", TORCH_FILE, "exec")
    assert "forged_filename" in codes(guard.findings())
    code = compile("x = 1", "<candidate>", "exec")
    guard.lock_down()
    with pytest.raises(PermissionError):
        code.replace(co_filename=TORCH_FILE + "x")


def test_a_thread_that_escaped_the_start_wrapper_is_still_reported(guard: Guard) -> None:
    stop = threading.Event()
    worker = threading.Thread(target=stop.wait, name="deferred-work")
    guard.close()  # the start wrappers are gone: as if the thread came by a path they miss
    worker.start()
    try:
        flags = guard.findings()
    finally:
        stop.set()
        worker.join()
    assert any(f.code == "thread_alive" and "deferred-work" in f.reason for f in flags)


def test_stream_creation_is_flagged(guard: Guard) -> None:
    with contextlib.suppress(RuntimeError):  # without CUDA the attempt is what counts
        torch.cuda.Stream()  # type: ignore[no-untyped-call]
    [flag] = [f for f in guard.findings() if f.code == "side_stream"]
    assert flag.severity == "reject" and "test_integrity.py" in flag.reason


def test_stream_next_to_cuda_graph_is_a_warning(guard: Guard) -> None:
    guard.lock_down()
    for make in (torch.cuda.Stream, torch.cuda.CUDAGraph):
        with contextlib.suppress(RuntimeError):  # streams are recorded, never refused
            make()
    [flag] = [f for f in guard.findings() if f.code == "side_stream"]
    assert flag.severity == "warn" and "CUDA graph" in flag.reason


def test_late_patch_seen_by_findings(guard: Guard) -> None:
    guard.lock_down()
    original = torch.add
    torch.add = lambda *a, **k: original(*a, **k)  # type: ignore[assignment]
    try:
        assert "patched_torch.add" in codes(guard.findings())
    finally:
        torch.add = original  # type: ignore[assignment]


def test_harness_patch_seen_even_if_the_checker_is_patched(guard: Guard) -> None:
    originals = compare.compare_outputs, snapshots.diff_globals
    compare.compare_outputs = lambda *a, **k: None  # type: ignore[assignment]
    snapshots.diff_globals = lambda *a, **k: []  # type: ignore[assignment]
    try:
        found = codes(guard.findings())
    finally:
        compare.compare_outputs, snapshots.diff_globals = originals
    assert {"patched_cudal1_evaluator.common.compare.compare_outputs",
            "patched_cudal1_evaluator.candidate_side.snapshots.diff_globals"} <= found


def test_closed_guard_is_inert() -> None:
    g = integrity.install_guards()
    g.lock_down()
    g.close()
    gc.get_objects()
    threading.Thread(target=print).start()
    assert threading._start_new_thread.__name__ != "start"  # type: ignore[attr-defined]


# -- globals ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("owner", "name", "code"), [
    (torch, "matmul", "patched_torch.matmul"),
    (time, "perf_counter", "patched_time.perf_counter"),
    (F, "relu", "patched_torch.nn.functional.relu"),
    (torch.Tensor, "__matmul__", "patched_torch.Tensor.__matmul__"),
    (torch.nn.Linear, "forward", "patched_torch.nn.Linear.forward"),
    (torch.cuda, "synchronize", "patched_torch.cuda.synchronize"),
])
def test_monkeypatch_detected(owner: object, name: str, code: str) -> None:
    before = integrity.snapshot_globals()
    own = vars(owner)
    original = own.get(name)
    setattr(owner, name, lambda *a, **k: None)
    try:
        flags = integrity.diff_globals(before, integrity.snapshot_globals())
    finally:
        if original is None:
            delattr(owner, name)
        else:
            setattr(owner, name, original)
    assert code in codes(flags)
    assert all(f.severity == "reject" for f in flags)
    assert integrity.diff_globals(before, integrity.snapshot_globals()) == []


def test_problem_module_edits_detected(tmp_path: Path) -> None:
    path = tmp_path / "problem_under_tmp.py"
    path.write_text("M = 128\nclass Model:\n    def forward(self, x):\n        return x\n")
    spec = importlib.util.spec_from_file_location("problem_under_tmp", path)
    assert spec is not None and spec.loader is not None
    problem = importlib.util.module_from_spec(spec)
    sys.modules["problem_under_tmp"] = problem
    snapshots.watch_problem_module("problem_under_tmp")  # as the harness names its problem
    try:
        spec.loader.exec_module(problem)
        before = integrity.snapshot_globals()
        problem.M = 16  # type: ignore[attr-defined]
        problem.Model.forward = lambda self, x: x  # type: ignore[attr-defined]
        found = codes(integrity.diff_globals(before, integrity.snapshot_globals()))
    finally:
        del sys.modules["problem_under_tmp"]
        snapshots.PROBLEM_MODULE_NAMES.discard("problem_under_tmp")
    assert {"patched_problem_under_tmp.M", "patched_problem_under_tmp.Model.forward"} <= found


def test_replaced_code_object_detected() -> None:
    before = integrity.snapshot_globals()
    original = F.hardtanh.__code__
    F.hardtanh.__code__ = F.relu6.__code__
    try:
        flags = integrity.diff_globals(before, integrity.snapshot_globals())
    finally:
        F.hardtanh.__code__ = original
    assert "patched_torch.nn.functional.hardtanh" in codes(flags)


def test_torch_wrapper_of_the_original_is_not_a_patch() -> None:
    before = integrity.snapshot_globals()
    original = torch.nn.Module.__setstate__
    run_as_library("import torch\n"
                   "def install():\n"  # the shape of torch._dynamo.mutation_guard's patch
                   "    old = torch.nn.Module.__setstate__\n"
                   "    def patched_setstate(self, state):\n"
                   "        old(self, state)\n"
                   "    torch.nn.Module.__setstate__ = patched_setstate\n"
                   "install()\n")
    try:
        assert integrity.diff_globals(before, integrity.snapshot_globals()) == []
    finally:
        torch.nn.Module.__setstate__ = original  # type: ignore[method-assign]


# -- settings -----------------------------------------------------------------------------------

def test_settings_diff_and_restore() -> None:
    before = integrity.snapshot_settings()
    torch.backends.cudnn.benchmark = not torch.backends.cudnn.benchmark
    torch.set_float32_matmul_precision("medium")
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.set_default_dtype(torch.float64)
    try:
        changed = integrity.diff_settings(before, integrity.snapshot_settings())
    finally:
        integrity.restore_settings(before)
    assert {"cudnn.benchmark", "float32_matmul_precision", "cuda.matmul.allow_tf32",
            "default_dtype"} <= set(changed)
    assert changed["default_dtype"] == {"before": "torch.float32", "after": "torch.float64"}
    assert integrity.diff_settings(before, integrity.snapshot_settings()) == {}
    assert torch.get_default_dtype() == torch.float32


# -- the candidate's namespace ------------------------------------------------------------------

PROBLEM = '''
import torch
import torch.nn as nn
M = 64
class Model(nn.Module):
    def forward(self, a):
        return torch.relu(a)
def get_inputs():
    return [torch.randn(M, M)]
def get_init_inputs():
    return []
'''


def namespace(source: str, extra: dict[str, object] | None = None) -> dict[str, object]:
    ns: dict[str, object] = dict(extra or {})
    exec(compile(source, "<test>", "exec"), ns)
    return ns


def test_honest_namespace_has_no_flags() -> None:
    problem = namespace(PROBLEM)
    cand = namespace(PROBLEM.replace("class Model(", "class ModelNew(")
                     .replace("torch.relu(a)", "a.clamp_min(0)"))
    assert integrity.check_candidate_namespace(problem, cand) == []


def test_modelnew_subclassing_model_rejected() -> None:
    problem = namespace(PROBLEM)
    same = namespace("class ModelNew(Model):\n    pass\n", {"Model": problem["Model"]})
    copied = namespace(PROBLEM + "\nclass ModelNew(Model):\n    pass\n")
    renamed = namespace(PROBLEM.replace("class Model(", "class Ref(") +
                        "\nclass ModelNew(Ref):\n    pass\n")
    for cand in (same, copied, renamed):
        flags = integrity.check_candidate_namespace(problem, cand)
        assert [f.severity for f in flags if f.code == "modelnew_is_reference"] == ["reject"]


def test_own_inputs_and_sizes_warned() -> None:
    problem = namespace(PROBLEM)
    cand = namespace(PROBLEM.replace("M = 64", "M = 8").replace("class Model(", "class ModelNew(")
                     .replace("torch.randn(M, M)", "torch.randn(M, 2)"))
    flags = integrity.check_candidate_namespace(problem, cand)
    assert {"own_inputs", "size_changed"} <= codes(flags)
    assert all(f.severity == "warn" for f in flags)


def test_missing_modelnew() -> None:
    assert "missing_modelnew" in codes(integrity.check_candidate_namespace({}, {"x": 1}))


# -- outputs ------------------------------------------------------------------------------------

class Sub(torch.Tensor):
    pass


def test_plain_outputs_pass() -> None:
    exp = torch.ones(3, 4)
    assert integrity.check_outputs(torch.zeros(3, 4), exp) == []
    assert integrity.check_outputs((torch.zeros(2), [torch.zeros(1)]),
                                   (torch.ones(2), [torch.ones(1)])) == []
    assert integrity.check_outputs(torch.empty(0, 4), torch.empty(0, 4)) == []


@pytest.mark.parametrize(("out", "code"), [
    (torch.zeros(3, 4).as_subclass(Sub), "output_subclass"),
    (torch.nn.Parameter(torch.zeros(3, 4)), "output_subclass"),
    (torch.empty(3, 4, device="meta"), "output_storage"),
    (torch.zeros(4, 3), "output_shape"),
    (torch.zeros(3, 4, dtype=torch.float64), "output_dtype"),
    ((torch.zeros(3, 4),), "output_structure"),
    ([1.0], "output_structure"),
    (torch.zeros(3, 4).to_sparse(), "output_storage"),
])
def test_bad_outputs_rejected(out: object, code: str) -> None:
    flags = integrity.check_outputs(out, torch.ones(3, 4))
    assert code in codes(flags) and all(f.severity == "reject" for f in flags)


def test_structure_length_and_alias() -> None:
    exp = torch.ones(3)
    assert "output_structure" in codes(integrity.check_outputs((exp.clone(),), (exp, exp)))
    assert "output_aliases_reference" in codes(integrity.check_outputs(exp, exp))
