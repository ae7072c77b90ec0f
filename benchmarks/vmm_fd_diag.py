"""Can a runner's arena be shared as a file descriptor instead of a driver IPC handle? The root
fix of ``docs/security.md``'s "Forged IPC handles" (round 23: handles are guessable) and of
"Lanes can talk through System V IPC" (an IPC namespace for CUDA children), tried on a GPU.

Process A (the referee's shape) makes a VMM allocation (``cuMemCreate`` with POSIX file
descriptor handles), maps it, writes a marker, exports it as a file descriptor and passes it
over a socket (``SCM_RIGHTS``) to process B (the runner's shape), which imports it, maps it,
reads the marker and writes its own. B runs in the host's IPC namespace, then in one of its
own (root only). Also times B's import and mapping (once a runner, outside any window).

    python benchmarks/vmm_fd_diag.py [--mib 64]

Prints one table: per IPC namespace, whether B read A's marker, whether A read B's, and
B's import-and-map time.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import socket
import subprocess
import sys
import time
from typing import Any

POSIX_FD, PINNED, ON_DEVICE, READ_WRITE = 1, 1, 1, 3


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class _Prop(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int),
                ("location", _Location), ("win32HandleMetaData", ctypes.c_void_p),
                ("allocFlags", _AllocFlags)]


class _Access(ctypes.Structure):
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


def _driver() -> Any:
    lib = ctypes.CDLL("libcuda.so.1")
    for name in ("cuInit", "cuDeviceGet", "cuDevicePrimaryCtxRetain", "cuCtxSetCurrent",
                 "cuMemGetAllocationGranularity", "cuMemCreate", "cuMemExportToShareableHandle",
                 "cuMemImportFromShareableHandle", "cuMemAddressReserve", "cuMemMap",
                 "cuMemSetAccess", "cuMemcpyHtoD_v2", "cuMemcpyDtoH_v2"):
        getattr(lib, name).restype = ctypes.c_int
    lib.cuMemcpyHtoD_v2.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t]
    lib.cuMemcpyDtoH_v2.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t]
    lib.cuMemAddressReserve.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t,
                                        ctypes.c_size_t, ctypes.c_uint64, ctypes.c_ulonglong]
    lib.cuMemMap.argtypes = [ctypes.c_uint64, ctypes.c_size_t, ctypes.c_size_t,
                             ctypes.c_ulonglong, ctypes.c_ulonglong]
    lib.cuMemSetAccess.argtypes = [ctypes.c_uint64, ctypes.c_size_t, ctypes.POINTER(_Access),
                                   ctypes.c_size_t]
    return lib


def _check(code: int, what: str) -> None:
    if code:
        raise RuntimeError(f"{what}: CUDA error {code}")


def _context(lib: Any) -> None:
    _check(lib.cuInit(0), "cuInit")
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    _check(lib.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    _check(lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
    _check(lib.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")


def _prop() -> _Prop:
    prop = _Prop()
    prop.type, prop.requestedHandleTypes = PINNED, POSIX_FD
    prop.location = _Location(ON_DEVICE, 0)
    return prop


def _map(lib: Any, handle: int, size: int) -> int:
    ptr = ctypes.c_uint64()
    _check(lib.cuMemAddressReserve(ctypes.byref(ptr), size, 0, 0, 0), "cuMemAddressReserve")
    _check(lib.cuMemMap(ptr.value, size, 0, handle, 0), "cuMemMap")
    access = _Access(_Location(ON_DEVICE, 0), READ_WRITE)
    _check(lib.cuMemSetAccess(ptr.value, size, ctypes.byref(access), 1), "cuMemSetAccess")
    return int(ptr.value)


def _word(lib: Any, ptr: int) -> int:
    value = ctypes.c_uint32()
    _check(lib.cuMemcpyDtoH_v2(ctypes.byref(value), ptr, 4), "cuMemcpyDtoH")
    return value.value


def _put(lib: Any, ptr: int, value: int) -> None:
    word = ctypes.c_uint32(value)
    _check(lib.cuMemcpyHtoD_v2(ptr, ctypes.byref(word), 4), "cuMemcpyHtoD")


def importer(sock_fd: int, size: int) -> None:
    """Process B: the descriptor from the socket, imported, mapped, read and written."""
    lib = _driver()
    _context(lib)
    with socket.socket(fileno=sock_fd) as sock:
        _msg, fds, _flags, _addr = socket.recv_fds(sock, 16, 1)
        started = time.perf_counter()
        handle = ctypes.c_ulonglong()
        _check(lib.cuMemImportFromShareableHandle(ctypes.byref(handle), ctypes.c_void_p(fds[0]),
                                                  POSIX_FD), "cuMemImportFromShareableHandle")
        ptr = _map(lib, handle.value, size)
        took_ms = (time.perf_counter() - started) * 1e3
        seen = _word(lib, ptr)
        _put(lib, ptr, 0xB0B0B0B0)
        sock.sendall(f"{seen:#x} {took_ms:.3f}\n".encode())


def _own_ipc() -> None:
    if ctypes.CDLL(None, use_errno=True).unshare(0x08000000) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWIPC)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--importer", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    lib = _driver()
    granule = ctypes.c_size_t()
    if args.importer is not None:
        _context(lib)
        _check(lib.cuMemGetAllocationGranularity(ctypes.byref(granule), ctypes.byref(_prop()),
                                                 0), "granularity")
        size = -(-(args.mib << 20) // granule.value) * granule.value
        importer(args.importer, size)
        return
    _context(lib)
    _check(lib.cuMemGetAllocationGranularity(ctypes.byref(granule), ctypes.byref(_prop()), 0),
           "cuMemGetAllocationGranularity")
    size = -(-(args.mib << 20) // granule.value) * granule.value
    handle = ctypes.c_ulonglong()
    _check(lib.cuMemCreate(ctypes.byref(handle), ctypes.c_size_t(size), ctypes.byref(_prop()),
                           ctypes.c_ulonglong(0)), "cuMemCreate")
    ptr = _map(lib, handle.value, size)
    fd = ctypes.c_int(-1)
    _check(lib.cuMemExportToShareableHandle(ctypes.byref(fd), handle, POSIX_FD, 0),
           "cuMemExportToShareableHandle")
    print(f"granularity {granule.value} bytes; allocation {size} bytes\n")
    print("| B's IPC namespace | B read A's marker | A read B's | B's import and map, ms |")
    print("| --- | --- | --- | --- |")
    for own in (False, True):
        if own and os.geteuid() != 0:
            print("| its own | (needs root) | | |")
            continue
        _put(lib, ptr, 0xA0A0A0A0)
        ours, theirs = socket.socketpair()
        proc = subprocess.Popen([sys.executable, __file__, "--mib", str(args.mib),
                                 "--importer", str(theirs.fileno())],
                                pass_fds=(theirs.fileno(),),
                                preexec_fn=_own_ipc if own else None)
        theirs.close()
        socket.send_fds(ours, [b"arena"], [fd.value])
        reply = ours.makefile().readline().split()
        proc.wait(timeout=120)
        ours.close()
        name = "its own" if own else "the host's"
        if len(reply) != 2:
            print(f"| {name} | failed (exit {proc.returncode}) | | |")
            continue
        mine = _word(lib, ptr)
        print(f"| {name} | {reply[0] == '0xa0a0a0a0'} ({reply[0]}) | {mine == 0xB0B0B0B0} "
              f"({mine:#x}) | {reply[1]} |")


if __name__ == "__main__":
    main()
