"""The file-system fallback without landlock: a private mount namespace, read-only but for
given dirs (stdlib only, ctypes). Needs CAP_SYS_ADMIN or unprivileged user namespaces, and
``mount_setattr`` (Linux 5.12+) to make every mount below ``/`` read-only at once."""

from __future__ import annotations

import ctypes
import os
import platform

_MOUNT_SETATTR = {"x86_64": 442, "aarch64": 442}
_CLONE_NEWNS, _CLONE_NEWUSER = 0x00020000, 0x10000000
_MS_REC, _MS_BIND, _MS_PRIVATE = 0x4000, 0x1000, 1 << 18
_AT_FDCWD, _AT_RECURSIVE = -100, 0x8000
_MOUNT_ATTR_RDONLY = 1


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


def _why() -> str:
    return os.strerror(ctypes.get_errno())


def _enter(libc: ctypes.CDLL) -> str:
    if libc.unshare(_CLONE_NEWNS) == 0:
        return ""
    uid, gid = os.geteuid(), os.getegid()
    if libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNS) != 0:
        return f"unshare(mount namespace): {_why()}"
    try:
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"),
                           ("gid_map", f"{gid} {gid} 1")):
            with open(f"/proc/self/{name}", "w") as fh:
                fh.write(text)
    except OSError as exc:
        return f"user namespace mapping: {exc}"
    return ""


def _setattr(libc: ctypes.CDLL, path: str, set_: int, clear: int, flags: int) -> int:
    attr = _MountAttr(set_, clear, 0, 0)
    number = _MOUNT_SETATTR[platform.machine()]
    return int(libc.syscall(ctypes.c_long(number), ctypes.c_int(_AT_FDCWD), path.encode(),
                            ctypes.c_uint(flags), ctypes.byref(attr),
                            ctypes.c_size_t(ctypes.sizeof(attr))))


def read_only_except(dirs: list[str]) -> tuple[str, str]:
    """("mount namespace", "") when ``/`` is read-only here except ``dirs``; ("", why not)."""
    if platform.machine() not in _MOUNT_SETATTR:
        return "", f"no mount_setattr syscall number for {platform.machine()}"
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    problem = _enter(libc)
    if problem:
        return "", problem
    if libc.mount(None, b"/", None, ctypes.c_ulong(_MS_REC | _MS_PRIVATE), None) != 0:
        return "", f"mount --make-rprivate /: {_why()}"
    real = [p for p in dict.fromkeys(os.path.realpath(d) for d in dirs) if os.path.isdir(p)]
    for path in real:
        if libc.mount(path.encode(), path.encode(), None, ctypes.c_ulong(_MS_BIND | _MS_REC),
                      None) != 0:
            return "", f"bind mount {path}: {_why()}"
    if _setattr(libc, "/", _MOUNT_ATTR_RDONLY, 0, _AT_RECURSIVE) != 0:
        return "", f"mount_setattr(/, read-only): {_why()}"
    for path in real:
        if _setattr(libc, path, 0, _MOUNT_ATTR_RDONLY, _AT_RECURSIVE) != 0:
            return "", f"mount_setattr({path}, writable): {_why()}"
    return "mount namespace", ""
