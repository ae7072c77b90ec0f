"""Device memory shared between the referee and a runner by plain CUDA driver IPC handles.

Inputs and output buffers: the referee's ``Arena``, one allocation per runner made by the
driver itself (never by torch's caching allocator, whose segments hold the referee's other
tensors, and whose IPC path keeps reference counts in files under ``/dev/shm``); the runner
opens its handle once (``open_arena``) and sees that allocation and nothing else.

Outputs: a runner's own output memory, read by the referee in place (no copy).

A runner names where each output lies: the IPC handle of the allocation that holds it and a
byte offset (``locate``). The referee opens each allocation once (``Mapper``) and reads the
bytes itself: it checks bounds against the size the driver reports for the mapping, never
against anything the runner said. Copying every output into a buffer of the referee's cost as
much as an elementwise kernel, inside every timed call; reading in place costs nothing there.

Plain ctypes on ``libcuda``: torch's own IPC path (``_share_cuda_``) keeps reference counts in
files under ``/dev/shm`` and costs tens of microseconds an output.
"""

from __future__ import annotations

import base64
import ctypes
import math
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


OBJECT_BYTES = 2 << 20  # the driver's memory object: smaller allocations share one


def whole_objects(nbytes: int) -> int:
    """An arena's size in whole memory objects: an IPC handle names an object and an offset
    into it, and the offset can be forged (round 23: a 1 MiB allocation's handle, offset by
    1 MiB, opened the next 1 MiB allocation of the same object), so no other allocation may
    share the arena's."""
    return -(-max(ALIGN, nbytes) // OBJECT_BYTES) * OBJECT_BYTES


class Arena:
    """The referee's memory for one runner's buffers: one allocation made by the driver
    (``cuMemAlloc``), handed out front to back (``take``). Its IPC handle opens exactly this
    allocation: a runner that maps it reaches none of the referee's other memory, and no file
    anywhere counts references to it. Its memory holds only its runner's buffers for its
    whole life, and is never freed by the referee: CUDA leaves freeing memory another process
    maps undefined, and a runner need not close its mapping (the referee's exit frees it)."""

    def __init__(self, device: torch.device, size: int) -> None:
        lib = _bind_context(device)
        ptr = ctypes.c_uint64()
        size = whole_objects(size)
        code = lib.cuMemAlloc_v2(ctypes.byref(ptr), size)
        if code:
            raise MemoryError(f"the driver could not allocate {size} bytes on {device} "
                              f"for a runner's buffers (CUDA error {code})")
        self.ptr, self.size, self._next = int(ptr.value), size, 0
        made = _Handle()
        code = lib.cuIpcGetMemHandle(ctypes.byref(made), self.ptr)
        if code:
            lib.cuMemFree_v2(self.ptr)
            raise RuntimeError(f"no IPC handle for a runner's buffers (CUDA error {code})")
        self.handle = bytes(made)
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


_arenas: dict[int, Mapper] = {}  # a runner's arenas by device, mapped once each


def open_arena(handle: bytes, device: torch.device) -> torch.Tensor:
    """The runner's side: the referee's arena behind ``handle``, mapped once a process, as
    bytes (the size is the driver's, never the description's)."""
    mapper = _arenas.get(device.index or 0)
    if mapper is None:
        _bind_context(device)  # opening a handle without a current context fails
        mapper = _arenas[device.index or 0] = Mapper(device)
    mapped = mapper.segment(handle)
    if mapped is None:
        raise RuntimeError(f"the referee's buffers did not open here (CUDA error "
                           f"{mapper.last_error})")
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
