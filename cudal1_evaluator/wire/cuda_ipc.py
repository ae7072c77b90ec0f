"""Device memory shared between the referee and a runner: inputs and output buffers through a
file descriptor, outputs in a runner's own memory through plain CUDA driver IPC handles.

Inputs and output buffers: the referee's ``Arena``, one allocation per runner made by the
driver's virtual memory management (``cuMemCreate``: never by torch's caching allocator, whose
segments hold the referee's other tensors), exported as a POSIX file descriptor and passed to
its runner, and to no one else, over the talk sockets (``SCM_RIGHTS``, relayed by the parent:
``wire/talk.py``). The runner imports it once (``open_arena``) and maps it: it sees that
allocation and nothing else. Nothing a runner holds names the arena by a value it could
guess or alter: a legacy IPC handle is a bearer token, and round 23 forged them (one runner
could have opened the other's arena, which holds the same input sets); a descriptor exists
only in the processes it was passed to. The arena has no legacy handle at all: the driver
makes those of ``cuMemAlloc`` memory only (as documented; a GPU test checks it).

Outputs: a runner's own output memory, read by the referee in place (no copy).

A runner names where each output lies: the IPC handle of the allocation that holds it and a
byte offset (``locate``). The referee opens each allocation once (``Mapper``) and reads the
bytes itself: it checks bounds against the size the driver reports for the mapping, never
against anything the runner said. Copying every output into a buffer of the referee's cost as
much as an elementwise kernel, inside every timed call; reading in place costs nothing there.
These handles are still legacy ones (``docs/security.md``, "Forged IPC handles").

Plain ctypes on ``libcuda``: torch's own IPC path (``_share_cuda_``) keeps reference counts in
files under ``/dev/shm`` and costs tens of microseconds an output.
"""

from __future__ import annotations

import base64
import ctypes
import itertools
import math
import os
import secrets
from collections import OrderedDict
from typing import Any

import torch

HANDLE_BYTES = 64
_LAZY_PEER_ACCESS = 1  # CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS
_DEVICE_ORDINAL = 9  # CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
ON_ANOTHER_GPU = -1  # Mapper.last_error: the allocation lies on a GPU other than the referee's
MAX_OPEN = 8192  # allocations a referee keeps mapped (oldest closed first, never a live one)


class _Handle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_ubyte * HANDLE_BYTES)]  # not c_char: it stops at a NUL


_driver: Any = None


def _cuda() -> Any:
    """libcuda's IPC entry points, bound once (None where there is no driver)."""
    global _driver
    if _driver is None:
        try:
            lib = ctypes.CDLL("libcuda.so.1")
        except OSError:
            _driver = False
            return None
        ptr, size = ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_size_t)
        lib.cuMemGetAddressRange_v2.argtypes = [ptr, size, ctypes.c_uint64]
        lib.cuIpcGetMemHandle.argtypes = [ctypes.POINTER(_Handle), ctypes.c_uint64]
        lib.cuIpcOpenMemHandle_v2.argtypes = [ptr, _Handle, ctypes.c_uint]
        lib.cuIpcCloseMemHandle.argtypes = [ctypes.c_uint64]
        lib.cuMemAlloc_v2.argtypes = [ptr, ctypes.c_size_t]
        lib.cuMemFree_v2.argtypes = [ctypes.c_uint64]
        lib.cuCtxGetCurrent.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
        lib.cuPointerGetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64]
        for fn in (lib.cuMemGetAddressRange_v2, lib.cuIpcGetMemHandle,
                   lib.cuIpcOpenMemHandle_v2, lib.cuIpcCloseMemHandle, lib.cuMemAlloc_v2,
                   lib.cuMemFree_v2, lib.cuCtxGetCurrent, lib.cuPointerGetAttribute):
            fn.restype = ctypes.c_int
        _driver = lib
    return _driver or None


def _bind_context(device: torch.device) -> Any:
    """libcuda with the device's primary context current on this thread (the one torch uses):
    a driver call made before the runtime touched the device on this thread has no context."""
    lib = _cuda()
    if lib is None:
        raise RuntimeError("no CUDA driver (libcuda.so.1) in this process")
    torch.cuda.init()  # type: ignore[no-untyped-call, unused-ignore]
    torch.cuda.synchronize(device)  # the runtime makes the primary context current here
    ctx = ctypes.c_void_p()
    if lib.cuCtxGetCurrent(ctypes.byref(ctx)) != 0 or not ctx.value:
        raise RuntimeError(f"no CUDA context is current for {device}")
    return lib


def address_range(ptr: int) -> tuple[int, int] | None:
    """(base, size) of the allocation holding device address ``ptr``."""
    lib = _cuda()
    if lib is None:
        return None
    base, size = ctypes.c_uint64(), ctypes.c_size_t()
    if lib.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), ptr) != 0:
        return None
    return int(base.value), int(size.value)


class Exporter:
    """The runner's side: where an output lies, as (handle index, byte offset). Handles are
    made once per allocation (the caching allocator keeps its segments)."""

    def __init__(self) -> None:
        self._handles: dict[int, bytes] = {}  # allocation base -> its IPC handle

    def locate(self, t: torch.Tensor, table: list[str], index: dict[bytes, int]
               ) -> list[int] | None:
        """[handle index in ``table``, byte offset] for a contiguous CUDA tensor, else None
        (the caller copies it into the referee's buffer instead)."""
        if t.device.type != "cuda" or not t.is_contiguous() or t.numel() == 0:
            return None
        ptr = int(t.data_ptr())
        found = address_range(ptr)
        if found is None:
            return None
        base, _size = found
        handle = self._handles.get(base)
        if handle is None:
            made = _Handle()
            if _cuda().cuIpcGetMemHandle(ctypes.byref(made), base) != 0:
                return None
            handle = self._handles[base] = bytes(made)
        if handle not in index:
            index[handle] = len(table)
            table.append(base64.b64encode(handle).decode("ascii"))
        return [index[handle], ptr - base]


class _Mapped:
    """An allocation of a runner's, mapped here: its bytes as a uint8 tensor."""

    def __init__(self, ptr: int, size: int, device: torch.device) -> None:
        self.ptr = ptr
        self.bytes = torch.as_tensor(_ArrayInterface(ptr, size), device=device)


class _ArrayInterface:
    def __init__(self, ptr: int, size: int) -> None:
        self.__cuda_array_interface__ = {"shape": (size,), "typestr": "|u1",
                                         "data": (ptr, False), "version": 2}


class Mapper:
    """The referee's side: open a runner's handles (once each, checked by the driver) and
    give the bytes at an offset as a tensor of the expected dtype and shape."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._open: OrderedDict[bytes, _Mapped] = OrderedDict()
        self.last_error = 0  # the driver's answer to the last handle it would not open
        self.opened = 0  # allocations mapped so far (a diagnostic: each costs a driver call)

    def segment(self, handle: bytes) -> torch.Tensor | None:
        """The mapped allocation's bytes, or None (not a handle the driver opens here)."""
        mapped = self._open.get(handle)
        if mapped is None:
            mapped = self._map(handle)
            if mapped is None:
                return None
            self._open[handle] = mapped
        self._open.move_to_end(handle)
        return mapped.bytes

    def _map(self, handle: bytes) -> _Mapped | None:
        lib = _cuda()
        if lib is None:
            return None
        ptr = ctypes.c_uint64()
        made = _Handle.from_buffer_copy(handle)
        code = lib.cuIpcOpenMemHandle_v2(ctypes.byref(ptr), made, _LAZY_PEER_ACCESS)
        if code:
            self.last_error = int(code)
            return None
        self.opened += 1
        found = address_range(int(ptr.value))
        if found is None or found[0] != int(ptr.value) or not self._on_own_gpu(lib, ptr.value):
            lib.cuIpcCloseMemHandle(ptr.value)
            return None
        return _Mapped(int(ptr.value), found[1], self.device)

    def _on_own_gpu(self, lib: Any, ptr: int) -> bool:
        """Does the mapped allocation lie on the referee's GPU? A runner's output made on
        another GPU (where nobody watches its work) would be read through peer access."""
        ordinal = ctypes.c_int(-1)
        if lib.cuPointerGetAttribute(ctypes.byref(ordinal), _DEVICE_ORDINAL, ptr) == 0 and \
                ordinal.value == (self.device.index if self.device.index is not None
                                  else torch.cuda.current_device()):
            return True
        self.last_error = ON_ANOTHER_GPU
        return False

    def trim(self, keep: set[bytes]) -> list[int]:
        """Unmap the oldest allocations beyond ``MAX_OPEN``, never one in ``keep``; returns
        where they were mapped (addresses the driver may give a later mapping)."""
        closed = []
        for handle in [h for h in self._open if h not in keep][:max(0, len(self._open) - MAX_OPEN)]:
            mapped = self._open.pop(handle)
            closed.append(mapped.ptr)
            self._close(mapped)
        return closed

    def _close(self, mapped: _Mapped) -> None:
        torch.cuda.synchronize(self.device)
        del mapped.bytes
        _cuda().cuIpcCloseMemHandle(mapped.ptr)

    def close(self) -> None:
        while self._open:
            self._close(self._open.popitem()[1])


ALIGN = 256  # every buffer of an arena starts on this boundary (any dtype's alignment)


def aligned(nbytes: int) -> int:
    """The room one buffer takes in an arena (at least one boundary, even when empty)."""
    return max(ALIGN, -(-nbytes // ALIGN) * ALIGN)


# The driver's virtual memory management, for the arenas (``cuMemCreate`` and the rest)
_POSIX_FD = 1  # CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
_PINNED = 1  # CU_MEM_ALLOCATION_TYPE_PINNED
_ON_DEVICE = 1  # CU_MEM_LOCATION_TYPE_DEVICE
_READ_WRITE = 3  # CU_MEM_ACCESS_FLAGS_PROT_READWRITE
_GRANULARITY_MINIMUM = 0  # CU_MEM_ALLOC_GRANULARITY_MINIMUM
_OUT_OF_MEMORY = 2  # CUDA_ERROR_OUT_OF_MEMORY
_VMM = ("cuMemGetAllocationGranularity", "cuMemCreate", "cuMemRelease", "cuMemAddressReserve",
        "cuMemAddressFree", "cuMemMap", "cuMemUnmap", "cuMemSetAccess",
        "cuMemExportToShareableHandle", "cuMemImportFromShareableHandle")


class _Location(ctypes.Structure):  # CUmemLocation
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):  # CUmemAllocationProp.allocFlags
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class _Prop(ctypes.Structure):  # CUmemAllocationProp
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int),
                ("location", _Location), ("win32HandleMetaData", ctypes.c_void_p),
                ("allocFlags", _AllocFlags)]


class _Access(ctypes.Structure):  # CUmemAccessDesc
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


_vmm_bound: Any = None


def _vmm(device: torch.device) -> Any:
    """libcuda with its VMM entry points bound and the device's primary context current; a
    RuntimeError that says so where the driver has none (older than CUDA 10.2)."""
    global _vmm_bound
    lib = _bind_context(device)
    if _vmm_bound is None:
        missing = [name for name in _VMM if not hasattr(lib, name)]
        if missing:
            raise RuntimeError("this CUDA driver has no virtual memory management "
                               f"({', '.join(missing)} missing): a runner's buffers are "
                               "shared only as a VMM allocation exported as a file descriptor")
        ull, size_t, ptr = ctypes.c_ulonglong, ctypes.c_size_t, ctypes.c_uint64
        lib.cuMemGetAllocationGranularity.argtypes = [ctypes.POINTER(size_t),
                                                      ctypes.POINTER(_Prop), ctypes.c_int]
        lib.cuMemCreate.argtypes = [ctypes.POINTER(ull), size_t, ctypes.POINTER(_Prop), ull]
        lib.cuMemRelease.argtypes = [ull]
        lib.cuMemAddressReserve.argtypes = [ctypes.POINTER(ptr), size_t, size_t, ptr, ull]
        lib.cuMemAddressFree.argtypes = [ptr, size_t]
        lib.cuMemMap.argtypes = [ptr, size_t, size_t, ull, ull]
        lib.cuMemUnmap.argtypes = [ptr, size_t]
        lib.cuMemSetAccess.argtypes = [ptr, size_t, ctypes.POINTER(_Access), size_t]
        lib.cuMemExportToShareableHandle.argtypes = [ctypes.c_void_p, ull, ctypes.c_int, ull]
        lib.cuMemImportFromShareableHandle.argtypes = [ctypes.POINTER(ull), ctypes.c_void_p,
                                                       ctypes.c_int]
        for name in _VMM:
            getattr(lib, name).restype = ctypes.c_int
        if hasattr(lib, "cuGetErrorName"):
            lib.cuGetErrorName.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
            lib.cuGetErrorName.restype = ctypes.c_int
        _vmm_bound = lib
    return _vmm_bound


def _error(lib: Any, code: int) -> str:
    """``CUDA error 801 (CUDA_ERROR_NOT_SUPPORTED)``, the name where the driver gives one."""
    name = ctypes.c_char_p()
    if hasattr(lib, "cuGetErrorName") and lib.cuGetErrorName(code, ctypes.byref(name)) == 0 \
            and name.value:
        return f"CUDA error {code} ({name.value.decode(errors='replace')})"
    return f"CUDA error {code}"


def _ordinal(device: torch.device) -> int:
    return device.index if device.index is not None else torch.cuda.current_device()


def _prop(ordinal: int) -> _Prop:
    """Device memory on ``ordinal`` that the driver exports as a POSIX file descriptor."""
    prop = _Prop()
    prop.type, prop.requestedHandleTypes = _PINNED, _POSIX_FD
    prop.location = _Location(_ON_DEVICE, ordinal)
    return prop


def _granule(lib: Any, ordinal: int) -> int:
    granule = ctypes.c_size_t()
    code = lib.cuMemGetAllocationGranularity(ctypes.byref(granule),
                                             ctypes.byref(_prop(ordinal)),
                                             _GRANULARITY_MINIMUM)
    if code or not granule.value:
        raise RuntimeError("this GPU or driver makes no device memory exportable as a file "
                           f"descriptor (cuMemGetAllocationGranularity: {_error(lib, code)})")
    return int(granule.value)


def granular(nbytes: int, granule: int) -> int:
    """An arena's size: ``nbytes`` (at least one buffer's room) rounded up to whole granules,
    as the driver maps allocations (2 MiB on the GPUs seen so far)."""
    return -(-max(ALIGN, nbytes) // granule) * granule


def _map(lib: Any, handle: int, size: int, ordinal: int) -> int:
    """Map the allocation behind ``handle`` (its first ``size`` bytes) at a new address,
    read-write for the device; undone where a step fails. The address."""
    ptr = ctypes.c_uint64()
    code = lib.cuMemAddressReserve(ctypes.byref(ptr), size, 0, 0, 0)
    if code:
        raise RuntimeError(f"no address range of {size} bytes for an arena "
                           f"(cuMemAddressReserve: {_error(lib, code)})")
    code = lib.cuMemMap(ptr.value, size, 0, handle, 0)
    if code:
        lib.cuMemAddressFree(ptr.value, size)
        raise RuntimeError(f"the driver would not map an arena's {size} bytes "
                           f"(cuMemMap: {_error(lib, code)})")
    access = _Access(_Location(_ON_DEVICE, ordinal), _READ_WRITE)
    code = lib.cuMemSetAccess(ptr.value, size, ctypes.byref(access), 1)
    if code:
        lib.cuMemUnmap(ptr.value, size)
        lib.cuMemAddressFree(ptr.value, size)
        raise RuntimeError(f"an arena mapped but not made accessible "
                           f"(cuMemSetAccess: {_error(lib, code)})")
    return int(ptr.value)


# an arena's serial: unique in its referee (a counter) and between referees (a random start:
# a runner's cache of its mappings can never take one referee's arena for another's)
_serial = itertools.count(secrets.randbits(40) << 12)


class Arena:
    """The referee's memory for one runner's buffers: one VMM allocation (``cuMemCreate``),
    handed out front to back (``take``). It is shared as a POSIX file descriptor (``fd``,
    exported once, the referee's own, close-on-exec) that the referee sends its runner with
    the pool: the runner that imports it maps this allocation and none of the referee's other
    memory, and nothing names it that another process could guess (no legacy IPC handle:
    the driver makes none of VMM memory). Its memory holds only its runner's buffers for its
    whole life and is never freed by the referee (an outgrown arena is kept:
    ``Referee.pool``); a runner need not close its mapping. ``serial`` tells a runner that a
    pool lies in an arena it mapped already (the same address again)."""

    def __init__(self, device: torch.device, size: int) -> None:
        lib = _vmm(device)
        ordinal = _ordinal(device)
        size = granular(size, _granule(lib, ordinal))
        handle = ctypes.c_ulonglong()
        code = lib.cuMemCreate(ctypes.byref(handle), size, ctypes.byref(_prop(ordinal)), 0)
        if code == _OUT_OF_MEMORY:
            raise MemoryError(f"the driver could not allocate {size} bytes on {device} "
                              f"for a runner's buffers ({_error(lib, code)})")
        if code:
            raise RuntimeError(f"no device memory exportable as a file descriptor for a "
                               f"runner's buffers (cuMemCreate: {_error(lib, code)})")
        try:
            ptr = _map(lib, handle.value, size, ordinal)
        except BaseException:
            lib.cuMemRelease(handle.value)
            raise
        fd = ctypes.c_int(-1)
        code = lib.cuMemExportToShareableHandle(ctypes.byref(fd), handle.value, _POSIX_FD, 0)
        if code or fd.value < 0:
            lib.cuMemUnmap(ptr, size)
            lib.cuMemAddressFree(ptr, size)
            lib.cuMemRelease(handle.value)
            raise RuntimeError(f"a runner's buffers not exportable as a file descriptor "
                               f"(cuMemExportToShareableHandle: {_error(lib, code)})")
        os.set_inheritable(fd.value, False)  # nothing the referee starts inherits it
        self.ptr, self.size, self._next = ptr, size, 0
        self.allocation = int(handle.value)  # the driver's handle: local to this process
        self.fd = int(fd.value)
        self.serial = next(_serial)
        self.bytes = torch.as_tensor(_ArrayInterface(self.ptr, self.size), device=device)

    @property
    def used(self) -> int:
        """Bytes handed out since the last ``restart`` (a multiple of ``ALIGN``)."""
        return self._next

    def restart(self) -> None:
        """Hand out from the start again (a new pool of the same runner: its old views are
        dropped, and every buffer is filled or poisoned before a runner's next call)."""
        self._next = 0

    def take(self, dtype: torch.dtype, shape: list[int]) -> tuple[int, torch.Tensor]:
        """(byte offset, a contiguous tensor there) for the next buffer."""
        nbytes = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
        offset = self._next
        if offset + aligned(nbytes) > self.size:
            raise ValueError("an arena sized for fewer buffers than were taken from it")
        self._next += aligned(nbytes)
        return offset, self.bytes[offset:offset + nbytes].view(dtype).view(shape)


_arenas: dict[tuple[int, int], torch.Tensor] = {}  # a runner's: (device, serial) -> its bytes


def open_arena(fd: int, size: int, serial: int, device: torch.device) -> torch.Tensor:
    """The runner's side: the referee's arena behind the descriptor ``fd`` (received with the
    pool; the caller closes it), imported and mapped once a process, as bytes. ``size`` is
    the referee's word (the allocation's size, which a runner must name to map it): the
    driver refuses to map more than the allocation holds, and every view is bounds-checked
    against what was mapped here. ``serial``: an arena mapped already (a pool made again in
    it) is the same mapping, at the same address; the new descriptor is not imported."""
    key = (_ordinal(device), serial)
    mapped = _arenas.get(key)
    if mapped is not None:
        if mapped.numel() != size:
            raise RuntimeError(f"the referee's arena {serial} is mapped here with "
                               f"{mapped.numel()} bytes, not the {size} described")
        return mapped
    if not isinstance(fd, int) or fd < 0:
        raise ValueError("no descriptor for the referee's arena")
    lib = _vmm(device)
    ordinal = key[0]
    granule = _granule(lib, ordinal)
    if size <= 0 or size % granule:
        raise RuntimeError(f"the referee's arena described with {size} bytes, not whole "
                           f"granules of {granule}: not mapped")
    handle = ctypes.c_ulonglong()
    code = lib.cuMemImportFromShareableHandle(ctypes.byref(handle), ctypes.c_void_p(fd),
                                              _POSIX_FD)
    if code:
        raise RuntimeError(f"the referee's arena did not import here "
                           f"(cuMemImportFromShareableHandle: {_error(lib, code)})")
    try:
        ptr = _map(lib, handle.value, size, ordinal)
    except RuntimeError as exc:
        raise RuntimeError(f"the referee's arena, {size} bytes as described, did not map "
                           f"here: {exc}") from None
    finally:
        lib.cuMemRelease(handle.value)  # the mapping keeps the memory; no handle stays here
    mapped = _arenas[key] = torch.as_tensor(_ArrayInterface(ptr, size), device=device)
    return mapped


def view_at(segment: torch.Tensor, offset: object, like: torch.Tensor) -> torch.Tensor | None:
    """The bytes at ``offset`` of a mapped allocation as a tensor shaped like ``like``
    (contiguous), or None when they do not fit inside it or are misaligned."""
    if not isinstance(offset, int) or isinstance(offset, bool):
        return None
    size = like.numel() * like.element_size()
    if offset < 0 or offset % like.element_size() or offset + size > segment.numel():
        return None
    return segment[offset:offset + size].view(like.dtype).view(like.shape)
