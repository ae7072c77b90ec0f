"""The arena's driver calls (``wire/cuda_ipc.py``) against a stand-in for ``libcuda``, without
a GPU: a driver without VMM or POSIX file descriptor support gives a RuntimeError that names
the CUDA error, never a crash; whatever was made before a failing step is undone; a runner
that names a size the driver will not map gets an error, never a view. (The real driver:
``tests/evaluator/test_trust_boundary.py::test_cuda_arena_round_trip_through_a_descriptor``.)"""

from __future__ import annotations

import ctypes
from typing import Any

import pytest
import torch

from cudal1_evaluator.wire import cuda_ipc

GRANULE = 2 << 20
DEV = torch.device("cuda", 0)


class FakeDriver:
    """The VMM entry points, answering ``codes[name]`` (0 unless told), recording calls."""

    def __init__(self, codes: dict[str, int] | None = None, missing: tuple[str, ...] = ()):
        self.codes = codes or {}
        self.calls: list[str] = []
        for name in cuda_ipc._VMM:
            if name not in missing:
                setattr(self, name, self._entry(name))

    def _entry(self, name: str) -> Any:
        def call(*args: Any) -> int:
            self.calls.append(name)
            code = self.codes.get(name, 0)
            if code == 0 and name == "cuMemGetAllocationGranularity":
                args[0]._obj.value = GRANULE
            if code == 0 and name in ("cuMemCreate", "cuMemImportFromShareableHandle"):
                args[0]._obj.value = 77
            if code == 0 and name == "cuMemAddressReserve":
                args[0]._obj.value = 0x7000_0000_0000
            if code == 0 and name == "cuMemExportToShareableHandle":
                ctypes.cast(args[0], ctypes.POINTER(ctypes.c_int))[0] = 9999
            return code
        return call


@pytest.fixture
def driver(monkeypatch: pytest.MonkeyPatch) -> Any:
    def install(fake: FakeDriver) -> FakeDriver:
        monkeypatch.setattr(cuda_ipc, "_vmm_bound", None)
        monkeypatch.setattr(cuda_ipc, "_bind_context", lambda device: fake)
        return fake
    return install


def test_a_driver_without_vmm_says_so(driver: Any) -> None:
    driver(FakeDriver(missing=("cuMemCreate", "cuMemExportToShareableHandle")))
    with pytest.raises(RuntimeError, match=r"no virtual memory management.*cuMemCreate"):
        cuda_ipc.Arena(DEV, 1 << 20)


def test_a_gpu_without_file_descriptor_export_names_the_cuda_error(driver: Any) -> None:
    driver(FakeDriver({"cuMemGetAllocationGranularity": 801}))
    with pytest.raises(RuntimeError, match=r"file descriptor.*CUDA error 801"):
        cuda_ipc.Arena(DEV, 1 << 20)
    fake = driver(FakeDriver({"cuMemCreate": 801}))
    with pytest.raises(RuntimeError, match="cuMemCreate: CUDA error 801"):
        cuda_ipc.Arena(DEV, 1 << 20)
    assert "cuMemMap" not in fake.calls


def test_no_room_is_a_memory_error(driver: Any) -> None:
    driver(FakeDriver({"cuMemCreate": 2}))
    with pytest.raises(MemoryError, match="CUDA error 2"):
        cuda_ipc.Arena(DEV, 1 << 20)


@pytest.mark.parametrize("step", ["cuMemMap", "cuMemSetAccess", "cuMemExportToShareableHandle"])
def test_a_failing_step_undoes_the_ones_before(driver: Any, step: str) -> None:
    fake = driver(FakeDriver({step: 1}))
    with pytest.raises(RuntimeError, match=f"{step}: CUDA error 1"):
        cuda_ipc.Arena(DEV, 1 << 20)
    undone = {"cuMemMap": ["cuMemAddressFree", "cuMemRelease"],
              "cuMemSetAccess": ["cuMemUnmap", "cuMemAddressFree", "cuMemRelease"],
              "cuMemExportToShareableHandle": ["cuMemUnmap", "cuMemAddressFree",
                                               "cuMemRelease"]}[step]
    assert fake.calls[fake.calls.index(step) + 1:] == undone


def test_a_runner_import_refused_or_a_size_not_mapped_is_an_error_and_undone(
        driver: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cuda_ipc, "_arenas", {})
    driver(FakeDriver({"cuMemImportFromShareableHandle": 801}))
    with pytest.raises(RuntimeError, match=r"did not import.*CUDA error 801"):
        cuda_ipc.open_arena(5, GRANULE, 1, DEV)
    fake = driver(FakeDriver({"cuMemMap": 1}))  # e.g. a size beyond the allocation
    with pytest.raises(RuntimeError, match=f"{2 * GRANULE} bytes as described, did not map"):
        cuda_ipc.open_arena(5, 2 * GRANULE, 1, DEV)
    assert fake.calls[-2:] == ["cuMemAddressFree", "cuMemRelease"]
    fake = driver(FakeDriver())
    with pytest.raises(RuntimeError, match="not whole granules"):
        cuda_ipc.open_arena(5, GRANULE + 256, 1, DEV)
    with pytest.raises(ValueError, match="no descriptor"):
        cuda_ipc.open_arena(-1, GRANULE, 1, DEV)
    assert "cuMemImportFromShareableHandle" not in fake.calls
    assert cuda_ipc._arenas == {}
