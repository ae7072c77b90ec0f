"""Tensors handed between the referee and the worker without pickling anything.

The referee (trusted) makes every shared tensor and describes it in JSON; the worker opens the
description. On CPU a tensor is a file in the per-evaluation exchange directory, mapped shared
by both (``torch.from_file``); on CUDA it is a place in the referee's ``Arena`` for that runner
(``wire/cuda_ipc.py``: one VMM allocation made by the driver, shared as a file descriptor that
travels with the pool over the talk sockets, no file anywhere; the description names it by
its index among the descriptors the runner received with it), which the referee keeps until
no runner may map it. Non-tensor inputs travel as JSON values.
"""

from __future__ import annotations

import ctypes
import fcntl
import itertools
import math
import mmap
import os
import secrets
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from cudal1_evaluator.isolation import lifetime
from cudal1_evaluator.wire.cuda_ipc import ALIGN, Arena, aligned, open_arena
from cudal1_evaluator.wire.talk_messages import SharedCuda, SharedDesc, SharedFile, SharedValue

_serial = itertools.count()
_MADV_POPULATE_READ = 22  # Linux 5.14+; older kernels answer EINVAL and nothing happens
_MAP_POPULATE = getattr(mmap, "MAP_POPULATE", 0x8000)
_libc = ctypes.CDLL(None, use_errno=True)
_madvise = _libc.madvise
_mmap = _libc.mmap
_mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                  ctypes.c_long]
_mmap.restype = ctypes.c_void_p
_munmap = _libc.munmap
_munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_munmap.restype = ctypes.c_int
_MAP_FAILED = ctypes.c_void_p(-1).value
_madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_madvise.restype = ctypes.c_int


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def dtype_of(name: Any) -> torch.dtype:
    found = getattr(torch, str(name), None)
    if not isinstance(found, torch.dtype):
        raise ValueError(f"not a dtype: {name!r}")
    return found


def export(value: object, directory: Path, device: torch.device, arena: Arena | None = None
           ) -> tuple[object, SharedDesc]:
    """(the referee's own view, the description the worker opens) of a fresh shared copy."""
    if not isinstance(value, torch.Tensor):
        return value, SharedValue(kind="value", value=value)
    return export_tensor(value, directory, device, arena)


def export_tensor(value: torch.Tensor, directory: Path, device: torch.device,
                  arena: Arena | None = None) -> tuple[torch.Tensor, SharedFile | SharedCuda]:
    """On CUDA into ``arena`` (sized with ``arena_bytes``), else into a new file."""
    if device.type == "cuda":
        if arena is None:
            raise ValueError("a CUDA tensor is shared through the runner's arena")
        return _export_cuda(value, arena)
    return _export_file(value, directory)


def arena_bytes(values: list[object]) -> int:
    """The room ``export`` needs in an arena for these values (non-tensors take none)."""
    return sum(aligned(v.numel() * v.element_size()) for v in values
               if isinstance(v, torch.Tensor))


def _export_file(value: torch.Tensor, directory: Path) -> tuple[torch.Tensor, SharedFile]:
    path = directory / f"t{next(_serial)}-{secrets.token_hex(8)}.bin"
    numel = value.numel()
    flat = _new_shared_file(path, max(numel, 1), value.dtype)
    shared = flat[:numel].view(value.shape)
    shared.copy_(value)
    return shared, {"kind": "file", "path": str(path), "dtype": dtype_name(value.dtype),
                    "shape": list(value.shape), "numel": numel}


def _export_cuda(value: torch.Tensor, arena: Arena) -> tuple[torch.Tensor, SharedCuda]:
    offset, shared = arena.take(value.dtype, list(value.shape))
    shared.copy_(value)
    return shared, {"kind": "cuda", "device": int(shared.device.index or 0), "arena": 0,
                    "arena_bytes": arena.size, "arena_serial": arena.serial,
                    "offset_bytes": offset, "dtype": dtype_name(shared.dtype),
                    "shape": list(shared.shape)}


def _new_shared_file(path: Path, numel: int, dtype: torch.dtype) -> torch.Tensor:
    """A new file at ``path``, mapped shared. The directory is a runner's, and the runner may
    write there: the name is unpredictable, the file must not exist yet, and a link is never
    followed (``O_EXCL | O_NOFOLLOW``), so a symbolic link planted by the runner cannot turn
    the referee's write into a write where the runner may not write. Mapped through the open
    descriptor, never through the name again. The directory is reached without following a
    link at any step (a runner may swap its exchange dir for a link to where it may not
    write: round 16). The file belongs to the directory's owner (a runner running as its own
    uid opens it read-write)."""
    directory = lifetime.open_dir_no_links(path.parent)
    try:
        fd = os.open(path.name, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600, dir_fd=directory)
        try:
            lifetime.give_to_owner_of(fd, directory)
        except BaseException:
            os.close(fd)
            raise
    finally:
        os.close(directory)
    try:
        return torch.from_file(f"/proc/self/fd/{fd}", shared=True, size=numel, dtype=dtype)
    finally:
        os.close(fd)


def open_shared(desc: SharedDesc, device: torch.device, fds: Sequence[int] = ()) -> object:
    """The worker's view of one described value (a tensor sharing the referee's memory).
    ``fds``: the descriptors received with the description (a CUDA tensor's arena is one)."""
    if desc["kind"] == "value":
        return desc.get("value")
    dtype = dtype_of(desc["dtype"])
    shape = [int(n) for n in desc["shape"]]
    if desc["kind"] == "file":
        numel = int(desc["numel"])
        if numel != math.prod(shape):
            raise ValueError("a shared tensor whose size does not match its shape")
        flat = torch.from_file(str(desc["path"]), shared=True, size=max(numel, 1), dtype=dtype)
        return flat[:numel].view(shape).to(device)
    if desc["kind"] == "cuda":
        return _open_cuda(desc, dtype, shape, device, fds)
    if desc["kind"] == "away":  # no buffer: a stand-in of its shape and dtype, no memory
        return torch.empty((), dtype=dtype, device=device).expand(shape)
    raise ValueError(f"unknown shared tensor kind {desc.get('kind')!r}")


def _open_cuda(desc: SharedCuda, dtype: torch.dtype, shape: list[int], device: torch.device,
               fds: Sequence[int]) -> torch.Tensor:
    """A view of the referee's arena (the descriptor at index ``arena`` of ``fds``), bounds
    checked against the size mapped here."""
    index = desc.get("arena")
    if type(index) is not int or not 0 <= index < len(fds):
        raise ValueError("a shared CUDA tensor in an arena whose descriptor did not come "
                         "with it")
    mapped = open_arena(fds[index], int(desc["arena_bytes"]), int(desc["arena_serial"]),
                        device)
    offset = int(desc["offset_bytes"])
    nbytes = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
    if offset < 0 or offset % ALIGN or offset + nbytes > mapped.numel():
        raise ValueError("a shared CUDA tensor outside its arena")
    return mapped[offset:offset + nbytes].view(dtype).view(shape)


def poison_value(dtype: torch.dtype) -> float | int | bool:
    """NaN, or the largest value for integers (True for bools)."""
    if dtype.is_floating_point or dtype.is_complex:
        return float("nan")
    if dtype == torch.bool:
        return True
    return int(torch.iinfo(dtype).max)


def poisoned_like(value: torch.Tensor) -> torch.Tensor:
    """A buffer of ``value``'s shape and dtype full of NaN (max for integers): an output buffer
    the worker never writes compares unequal."""
    return torch.full_like(value, poison_value(value.dtype),
                           memory_format=torch.contiguous_format)


def copyable(t: object, buf: torch.Tensor) -> bool:
    """A plain tensor of the buffer's shape, dtype and device (else the copy is skipped and
    the buffer keeps its poison)."""
    return (type(t) is torch.Tensor and t.layout == torch.strided and not t.is_meta
            and t.shape == buf.shape and t.dtype == buf.dtype and t.device == buf.device)


def deliver_into(buf: torch.Tensor, t: torch.Tensor, memmove: Callable[..., object],
                 copy: Callable[[torch.Tensor, torch.Tensor], object]) -> None:
    """One output into its buffer, the same way in every runner, inside the timed window.
    Host memory: a plain memmove; device memory: ``copy``. The runner passes the two
    functions it bound before the candidate was imported (friction only: the referee checks
    what lands in the buffer)."""
    if t.device.type == buf.device.type == "cpu" and t.is_contiguous() and \
            buf.is_contiguous():
        memmove(buf.data_ptr(), t.data_ptr(), t.numel() * t.element_size())
    else:
        copy(buf, t)


def set_offsets(values: Sequence[object]) -> tuple[list[int | None], int]:
    """Where each tensor of an input set lies in the set's one shared file (None: a plain
    value), and the file's size: the same rule on both sides, so the file carries no layout
    a runner would have to believe."""
    offsets: list[int | None] = []
    end = 0
    for value in values:
        if isinstance(value, torch.Tensor):
            offsets.append(end)
            end += aligned(value.numel() * value.element_size())
        else:
            offsets.append(None)
    return offsets, max(end, ALIGN)


def host_set(values: Sequence[object]) -> tuple[int, list[object]]:
    """A fresh anonymous shared file (``memfd``) holding an input set's tensors: its
    descriptor and the referee's own views of it. A runner gets the descriptor when the set's
    call is due, never a name: no path leads to the set before then (round 28, a window's
    later inputs read at its first call)."""
    offsets, size = set_offsets(values)
    fd = os.memfd_create("cudal1-set", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, size)
        # Its size fixed for good: a runner that cut the file short would kill the referee
        # reading its own mapping with SIGBUS (round 29; landlock's refusal of truncation
        # covers files it opens, not a descriptor it was handed). Writes stay allowed: a
        # candidate that writes into its inputs is the input check's to see.
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS,
                    fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
        raw = _map_shared(fd, size, 0)
    except BaseException:
        os.close(fd)
        raise
    views: list[object] = []
    for value, offset in zip(values, offsets, strict=True):
        if isinstance(value, torch.Tensor) and offset is not None:
            view = _view(raw, offset, value.dtype, list(value.shape))
            view.copy_(value)
            views.append(view)
        else:
            views.append(value)
    return fd, views


def open_host_set(fd: int, like: Sequence[object]) -> list[object]:
    """The runner's views of a set handed over as ``fd`` (``host_set``), laid out by ``like``
    (its slot's inputs: same shapes and dtypes), mapped with its pages in at once: the
    mapping is on the clock, the same for every runner. Plain values stay ``like``'s."""
    offsets, size = set_offsets(like)
    if os.fstat(fd).st_size < size:
        raise ValueError("an input set's file is shorter than its inputs")
    raw = _map_shared(fd, size, _MAP_POPULATE)
    return [_view(raw, offset, t.dtype, list(t.shape))
            if isinstance(t, torch.Tensor) and offset is not None else t
            for t, offset in zip(like, offsets, strict=True)]


def _map_shared(fd: int, size: int, flags: int) -> torch.Tensor:
    """``fd``'s first ``size`` bytes mapped shared, as a uint8 tensor; unmapped when the last
    view of it goes. Not ``mmap.mmap``: it keeps a duplicate of the descriptor for as long as
    the mapping lives, and a window's sets (up to ``MAX_CALLS`` a runner) ran the referee out
    of descriptors."""
    addr = _mmap(None, size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED | flags, fd, 0)
    if addr is None or addr == _MAP_FAILED:
        err = ctypes.get_errno()
        raise OSError(err, f"cannot map an input set: {os.strerror(err)}")
    buffer = (ctypes.c_char * size).from_address(addr)
    weakref.finalize(buffer, _munmap, addr, size)
    return torch.frombuffer(buffer, dtype=torch.uint8)


def _view(raw: torch.Tensor, offset: int, dtype: torch.dtype, shape: list[int]) -> torch.Tensor:
    nbytes = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
    return raw[offset:offset + nbytes].view(dtype).view(shape)


def populate(value: object) -> bool:
    """Map a shared host tensor's pages into this process now, outside any timed call. The
    referee's own input copies are fresh clones, their pages mapped before its burst; without
    this the worker's first read of each input took the page faults in the candidate's timed
    call. A no-op for values, CUDA tensors and kernels without ``MADV_POPULATE_READ``; True
    when the pages were mapped."""
    if not isinstance(value, torch.Tensor) or value.device.type != "cpu" or value.numel() == 0:
        return False
    start = value.data_ptr() // mmap.PAGESIZE * mmap.PAGESIZE
    end = value.data_ptr() + value.numel() * value.element_size()
    return bool(_madvise(start, end - start, _MADV_POPULATE_READ) == 0)

