"""Landlock through ctypes (stdlib only): writes only beneath given dirs, no TCP, no signals out.

Reads and execution stay unrestricted (the interpreter, site-packages, the problem and the CUDA
libraries must stay readable). Every write-type right is handled, so only the rules' dirs allow
them. ABI 4+ also handles TCP bind/connect with no rule (refused), ABI 6+ scopes abstract Unix
sockets and signals to the sandbox.
"""

from __future__ import annotations

import ctypes
import os
import platform
from collections.abc import Sequence

_SYSCALLS = {"x86_64": (444, 445, 446), "aarch64": (444, 445, 446)}
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1

_WRITE_FILE, _REMOVE_DIR, _REMOVE_FILE = 1 << 1, 1 << 4, 1 << 5
_MAKE = sum(1 << b for b in range(6, 13))  # char, dir, reg, sock, fifo, block, sym
_REFER, _TRUNCATE = 1 << 13, 1 << 14
_NET_TCP = (1 << 0) | (1 << 1)  # bind, connect
_SCOPE = (1 << 0) | (1 << 1)  # abstract unix sockets, signals
_PR_SET_NO_NEW_PRIVS = 38


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _syscall(number: int, *args: object) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return int(libc.syscall(ctypes.c_long(number), *args))


def abi_version() -> tuple[int, str]:
    """(ABI version, "") when landlock is usable, else (0, why not)."""
    numbers = _SYSCALLS.get(platform.machine())
    if numbers is None:
        return 0, f"no landlock syscall numbers for {platform.machine()}"
    version = _syscall(numbers[0], None, ctypes.c_size_t(0),
                       ctypes.c_uint32(_CREATE_RULESET_VERSION))
    if version < 0:
        errno = ctypes.get_errno()
        return 0, f"landlock unavailable in kernel {platform.release()} ({os.strerror(errno)})"
    return version, ""


def _handled_fs(abi: int) -> int:
    rights = _WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE
    if abi >= 2:
        rights |= _REFER
    if abi >= 3:
        rights |= _TRUNCATE
    return rights


def restrict_writes(dirs: list[str], *, network: bool = True,
                    fixed_size: Sequence[str] = (),
                    files_only: Sequence[str] = ()) -> tuple[str, str]:
    """Allow writes beneath ``dirs`` only (and with ``network``, refuse TCP and scope signals
    where the ABI can: a stacked layer needs not repeat them). Files beneath ``fixed_size``
    (also in ``dirs``) may be written but not truncated (ABI 3+): memory the referee maps
    there cannot be cut short under it (a read past a file's end is a SIGBUS). Beneath
    ``files_only`` (also in ``dirs``) only files that exist may be written: nothing made,
    removed or moved (device nodes are written; nothing new belongs in ``/dev``).
    Returns ("ABI n", "") when in force, else ("", why not)."""
    abi, why = abi_version()
    if not abi:
        return "", why
    create, add_rule, restrict_self = _SYSCALLS[platform.machine()]
    fs = _handled_fs(abi)
    attr = _RulesetAttr(fs, _NET_TCP if network and abi >= 4 else 0,
                        _SCOPE if network and abi >= 6 else 0)
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else (16 if abi >= 4 else 8)
    ruleset = _syscall(create, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        return "", f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}"
    try:
        keep = {os.path.realpath(d) for d in fixed_size}
        existing = {os.path.realpath(d) for d in files_only}
        for path in dict.fromkeys(os.path.realpath(d) for d in dirs):
            rights = fs & ~_TRUNCATE if path in keep else fs
            if path in existing:
                rights &= _WRITE_FILE | _TRUNCATE
            problem = _allow(add_rule, ruleset, path, rights)
            if problem:
                return "", problem
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return "", f"prctl(NO_NEW_PRIVS): {os.strerror(ctypes.get_errno())}"
        if _syscall(restrict_self, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            return "", f"landlock_restrict_self: {os.strerror(ctypes.get_errno())}"
    finally:
        os.close(ruleset)
    return f"ABI {abi}", ""


def _allow(add_rule: int, ruleset: int, path: str, rights: int) -> str:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return ""  # a dir that does not exist grants nothing
    try:
        if not os.path.isdir(path):
            rights &= _WRITE_FILE | _TRUNCATE  # file rules take file rights only
        rule = _PathBeneath(rights, fd)
        if _syscall(add_rule, ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH),
                    ctypes.byref(rule), ctypes.c_uint32(0)) != 0:
            return f"landlock_add_rule({path}): {os.strerror(ctypes.get_errno())}"
    finally:
        os.close(fd)
    return ""
