"""System calls no candidate needs, refused by a seccomp filter (stdlib only, ctypes; Linux).

The kernel's key management (``add_key``, ``request_key``, ``keyctl``) keeps keyrings per uid
that outlive a process: every candidate started as root runs as ``nobody``, and a key one of
them added was read by the next (round 17), or by a candidate running beside it in another
lane. No kernel, CUDA or PyTorch path a candidate needs uses them, so they answer ``ENOSYS``
(what a kernel built without keys answers: software that asks falls back). The filter is
installed in the child's work process before any candidate code and holds for every process
and thread it starts; a filter cannot be removed, only stacked.

The same goes for fscrypt's key ioctls (a file system's keyring outlives a process too) and
for ``clone3``: its ``CLONE_INTO_CGROUP`` starts a process in any cgroup whose
``cgroup.procs`` the uid may write, a way out of the child's own (round 19; the child's cgroup
namespace refuses it as well). C libraries fall back to ``clone`` on ``ENOSYS``, as they do
under container runtimes' default filters. A new user namespace (``clone`` or ``unshare``
with ``CLONE_NEWUSER``) answers ``EPERM``: inside one a candidate held every capability
(round 20; landlock alone kept it from mounting), and nothing a candidate needs makes one.

On x86_64 the same calls are refused through the 32-bit entry (``int 0x80``, other numbers)
and every x32 call is refused (no candidate is an x32 program); a call whose architecture
the filter does not know is refused too.

Reaching into another process answers ``EPERM`` (what Yama's ``ptrace_scope`` answers):
``ptrace``, ``process_vm_readv``/``writev``, ``pidfd_getfd``, ``process_madvise`` and ``kcmp``.
Where a candidate runs as the app's user with no PID namespace (the fallback sandbox) and the
host has no Yama, it could otherwise attach to a trusted process of that user while that
process is still dumpable (a lane in its first ~0.1 s, round 33), take its descriptors, or page
out the reference's memory. Inputs and outputs reach a candidate by ``SCM_RIGHTS`` and the
parent reads outputs with its own ``process_vm_readv``: no candidate-side path calls them.

Setting another process's limits answers ``EPERM``: ``prlimit64`` sets limits on pid 0 (what
libc's ``setrlimit`` passes) and reads them on any. In a user namespace the init of the
child's PID namespace has the candidate's uid, and a candidate cut its descriptor limit to 0,
which blinded the tripwire for new threads and processes (a fresh-eyes round, 2026-12-01).
Without a PID namespace of its own (the fallback sandbox) a candidate sees every process of
its uid, the reference runner's included, and it set that runner to ``SCHED_IDLE`` pinned to
one CPU: there (``strict``), ``setpriority`` and ``ioprio_set`` are allowed on the caller
only and ``sched_setparam``/``setscheduler``/``setaffinity``/``setattr``, ``migrate_pages``
and ``move_pages`` on pid 0 only, at a price: a thread pinned by its own tid (libgomp with
``OMP_PROC_BIND``, ``pthread_setaffinity_np``) is refused. In a PID namespace those calls
reach only the candidate's own processes and its init, which only relays stops (slowing it
slows the candidate's own evaluation), so they stay allowed.

``userfaultfd`` answers ``ENOSYS`` (what a kernel built without it answers), and so does
``/dev/userfaultfd``'s one ioctl (``USERFAULTFD_IOC_NEW``): on a CPU the parent reads a
sample of each call's outputs out of the runner's memory while the runner runs, at places
drawn then, and the whole outputs later (round 41). Where the kernel lets a process handle
the faults of other processes' reads of its memory (``vm.unprivileged_userfaultfd=1``, the
default from Linux 5.2 to 5.10 and the only behaviour before it; or the device's file open
to the candidate's uid), a candidate registers its outputs' pages as missing and the
parent's read of each page waits for the candidate's handler, which learns the page and
fills it then: the sample's places are no longer unknown to it, and a call's output need be
whole only where the parent reads. Where that is refused (``=0`` since 5.11) a user-mode-only
one makes the parent's read of such a page fail, no more than memory made unreadable does;
it is refused too. No PyTorch or CUDA path a candidate needs uses it.

``setsid`` answers ``EPERM`` too (what it answers a process group leader): on a kernel with
autogroups each new session is a scheduling group of its own, so a candidate with K helpers
in sessions of their own got K+1 fair shares of a busy host's CPUs where the reference got
one (round 31). Every process of the child is in one session, the one its parent made.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
from dataclasses import dataclass

LAYER = "syscalls"
_PR_SET_NO_NEW_PRIVS = 38
_SECCOMP_SET_MODE_FILTER, _SECCOMP_FILTER_FLAG_TSYNC = 1, 1
_SYS_SECCOMP = {"x86_64": 317, "aarch64": 277}
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
_X32_BIT = 0x40000000
# classic BPF opcodes: load a word at an absolute offset, jump if equal / greater or equal /
# any bit set, return a constant
_LD_W_ABS, _JEQ_K, _JGE_K, _JSET_K, _RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
_NR_OFFSET, _ARCH_OFFSET = 0, 4  # struct seccomp_data

_ARG1_LOW_OFFSET = 24  # struct seccomp_data: args[1], its low 32 bits (little endian)
_CLONE3 = 435  # the same number on every architecture here

# fscrypt's key ioctls: on a file system with encryption on, a key added by one candidate stays
# in the file system's keyring for the next (round 19)
_FSCRYPT_KEY_IOCTLS = (0xC0506617, 0xC0406618, 0xC0406619, 0xC080661A)
_USERFAULTFD_IOC_NEW = 0xAA00  # /dev/userfaultfd: a userfaultfd by the device (round 41)
_REFUSED_IOCTLS = (*_FSCRYPT_KEY_IOCTLS, _USERFAULTFD_IOC_NEW)


_ARG0_LOW_OFFSET = 16  # args[0], its low 32 bits: the flags of clone and unshare
_ARG2_LOW_OFFSET, _ARG2_HIGH_OFFSET = 32, 36  # args[2]: prlimit64's new limits (NULL: a read)
_CLONE_NEWUSER = 0x10000000
_PRIO_PROCESS, _IOPRIO_WHO_PROCESS = 0, 1


@dataclass(frozen=True)
class _Arch:
    audit: int
    keys: tuple[int, ...]  # add_key, request_key, keyctl
    ioctl: int
    namespacing: tuple[int, ...]  # clone, unshare: refused with CLONE_NEWUSER in their flags
    reaching: tuple[int, ...]  # ptrace, process_vm_readv/writev, kcmp (refused with EPERM)
    setsid: int
    prlimit: int  # sets limits on pid 0 only
    # strict: sched_setparam, sched_setscheduler, sched_setaffinity, sched_setattr,
    # migrate_pages, move_pages on pid 0 only; setpriority, ioprio_set on the caller only
    own_pid: tuple[int, ...]
    priorities: tuple[int, int]
    userfaultfd: int  # refused (ENOSYS): round 41
    from_up: int | None = None  # refuse every number from this one up


_ARCHES = (
    _Arch(0xC000003E, (248, 249, 250), 16, (56, 272), (101, 310, 311, 312), 112, 302,
          (142, 144, 203, 314, 256, 279), (141, 251), 323, _X32_BIT),  # x86_64 (x32: the bit)
    _Arch(0x40000003, (286, 287, 288), 54, (120, 310), (26, 347, 348, 349), 66, 340,
          (154, 156, 241, 351, 294, 317), (97, 289), 374),  # i386
    _Arch(0xC00000B7, (217, 218, 219), 29, (220, 97), (117, 270, 271, 272), 157, 261,
          (118, 119, 122, 274, 238, 239), (140, 30), 282),  # aarch64
)
_PIDFD_GETFD, _PROCESS_MADVISE = 438, 440  # the same numbers on every architecture here

Instruction = tuple[int, int, int, int]


class _Instruction(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8),
                ("k", ctypes.c_uint32)]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_Instruction))]


def _assemble(lines: list[tuple[int, str, str, int] | str]) -> list[Instruction]:
    """Labels (strings) and (code, label if true, label if false, constant) to instructions
    with relative jumps ("" falls through)."""
    where: dict[str, int] = {}
    count = 0
    for line in lines:
        if isinstance(line, str):
            if line in where:
                raise ValueError(f"label {line!r} twice")
            where[line] = count
        else:
            count += 1
    out: list[Instruction] = []
    for line in lines:
        if isinstance(line, str):
            continue
        code, true, false, k = line
        here = len(out) + 1
        jumps = [where[label] - here if label else 0 for label in (true, false)]
        if not all(0 <= j <= 255 for j in jumps):  # 8 bits, forward only: never wrapped
            raise ValueError(f"a jump out of range at instruction {len(out)}: {jumps}")
        out.append((code, jumps[0], jumps[1], k))
    return out


def program(strict: bool = False) -> list[Instruction]:
    """The filter: per architecture, the key calls, ``clone3``, ``userfaultfd``, fscrypt's key
    ioctls and ``/dev/userfaultfd``'s are refused (``ENOSYS``); a new user namespace, a new
    session, reaching into another process and setting another's scheduling or limits answer
    ``EPERM``, as where they are off; the rest is allowed; an architecture no block names is
    refused whole."""
    lines: list[tuple[int, str, str, int] | str] = []
    for i, arch in enumerate(_ARCHES):
        lines += [(_LD_W_ABS, "", "", _ARCH_OFFSET), (_JEQ_K, "", f"next{i}", arch.audit),
                  (_LD_W_ABS, "", "", _NR_OFFSET)]
        if arch.from_up is not None:
            lines.append((_JGE_K, "refuse", "", arch.from_up))
        lines += [(_JEQ_K, "refuse", "", nr) for nr in (*arch.keys, _CLONE3, arch.userfaultfd)]
        lines += [(_JEQ_K, "forbid", "", nr)
                  for nr in (*arch.reaching, _PIDFD_GETFD, _PROCESS_MADVISE, arch.setsid)]
        lines += [(_JEQ_K, f"userns{i}", "", nr) for nr in arch.namespacing]
        lines.append((_JEQ_K, f"prlimit{i}", "", arch.prlimit))
        if strict:
            lines += [(_JEQ_K, f"self{i}", "", nr) for nr in arch.own_pid]
            lines += [(_JEQ_K, f"prio{i}", "", arch.priorities[0]),
                      (_JEQ_K, f"ioprio{i}", "", arch.priorities[1])]
        lines += [(_JEQ_K, f"ioctl{i}", "allow", arch.ioctl), f"ioctl{i}",
                  (_LD_W_ABS, "", "", _ARG1_LOW_OFFSET)]
        lines += [(_JEQ_K, "refuse", "", cmd) for cmd in _REFUSED_IOCTLS]
        lines += [(_RET_K, "", "", _RET_ALLOW), f"userns{i}",
                  (_LD_W_ABS, "", "", _ARG0_LOW_OFFSET),
                  (_JSET_K, "forbid", "allow", _CLONE_NEWUSER),
                  f"prlimit{i}", (_LD_W_ABS, "", "", _ARG0_LOW_OFFSET),
                  (_JEQ_K, "allow", "", 0), (_LD_W_ABS, "", "", _ARG2_LOW_OFFSET),
                  (_JEQ_K, "", "forbid", 0), (_LD_W_ABS, "", "", _ARG2_HIGH_OFFSET),
                  (_JEQ_K, "allow", "forbid", 0)]
        if strict:
            lines += [f"self{i}", (_LD_W_ABS, "", "", _ARG0_LOW_OFFSET),
                      (_JEQ_K, "allow", "forbid", 0),
                      f"prio{i}", (_LD_W_ABS, "", "", _ARG0_LOW_OFFSET),
                      (_JEQ_K, f"who{i}", "forbid", _PRIO_PROCESS),
                      f"ioprio{i}", (_LD_W_ABS, "", "", _ARG0_LOW_OFFSET),
                      (_JEQ_K, f"who{i}", "forbid", _IOPRIO_WHO_PROCESS),
                      f"who{i}", (_LD_W_ABS, "", "", _ARG1_LOW_OFFSET),
                      (_JEQ_K, "allow", "forbid", 0)]
        lines.append(f"next{i}")
    lines += [(_RET_K, "", "", _RET_ERRNO | errno.ENOSYS),  # an architecture no block names
              "refuse", (_RET_K, "", "", _RET_ERRNO | errno.ENOSYS),
              "forbid", (_RET_K, "", "", _RET_ERRNO | errno.EPERM),
              "allow", (_RET_K, "", "", _RET_ALLOW)]
    return _assemble(lines)


def install(strict: bool = False) -> tuple[bool, str]:
    """(installed, what holds or why not), in the calling process and all its threads;
    ``strict`` where the candidate has no PID namespace of its own (see the module)."""
    number = _SYS_SECCOMP.get(platform.machine())
    if number is None:
        return False, f"no seccomp filter for {platform.machine()}"
    code = program(strict)
    instructions = (_Instruction * len(code))(*[_Instruction(*i) for i in code])
    prog = _Program(len(code), instructions)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return False, f"prctl(NO_NEW_PRIVS): {os.strerror(ctypes.get_errno())}"
    if libc.syscall(number, _SECCOMP_SET_MODE_FILTER, _SECCOMP_FILTER_FLAG_TSYNC,
                    ctypes.byref(prog)) != 0:
        return False, f"seccomp: {os.strerror(ctypes.get_errno())}"
    return True, ("seccomp: kernel keyrings, fscrypt keys, clone3 (into another cgroup), "
                  "userfaultfd, "
                  "new user namespaces, new sessions, reaching into other processes "
                  "(ptrace, process_vm_*, pidfd_getfd) and setting their limits"
                  + (" or scheduling" if strict else "") + " refused")
