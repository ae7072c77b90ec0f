"""System calls no candidate needs, refused by a seccomp filter (stdlib only, ctypes; Linux).

The kernel's key management (``add_key``, ``request_key``, ``keyctl``) keeps keyrings per uid
that outlive a process: every candidate started as root runs as ``nobody``, and a key one of
them added was read by the next (round 17), or by a candidate running beside it in another
lane. No kernel, CUDA or PyTorch path a candidate needs uses them, so they answer ``ENOSYS``
(what a kernel built without keys answers: software that asks falls back). The filter is
installed in the child's work process before any candidate code and holds for every process
and thread it starts; a filter cannot be removed, only stacked.

On x86_64 the same calls are refused through the 32-bit entry (``int 0x80``, other numbers)
and every x32 call is refused (no candidate is an x32 program); a call whose architecture
the filter does not know is refused too.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform

LAYER = "syscalls"
_PR_SET_NO_NEW_PRIVS = 38
_SECCOMP_SET_MODE_FILTER, _SECCOMP_FILTER_FLAG_TSYNC = 1, 1
_SYS_SECCOMP = {"x86_64": 317, "aarch64": 277}
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
_X32_BIT = 0x40000000
# classic BPF opcodes: load a word at an absolute offset, jump if equal / greater or equal,
# return a constant
_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_NR_OFFSET, _ARCH_OFFSET = 0, 4  # struct seccomp_data

# audit arch -> (the key calls' numbers there, refuse every number from this one up)
_DENIED: dict[int, tuple[tuple[int, ...], int | None]] = {
    0xC000003E: ((248, 249, 250), _X32_BIT),  # x86_64 (x32 numbers carry the x32 bit)
    0x40000003: ((286, 287, 288), None),  # i386, reachable from x86_64 by int 0x80
    0xC00000B7: ((217, 218, 219), None),  # aarch64
}


class _Instruction(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8),
                ("k", ctypes.c_uint32)]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_Instruction))]


def program() -> list[tuple[int, int, int, int]]:
    """The filter as (code, jump if true, jump if false, constant) instructions: one block per
    architecture, each refusing its numbers and allowing the rest."""
    refuse = _RET_ERRNO | errno.ENOSYS
    blocks: list[list[tuple[int, int, int, int]]] = []
    for numbers, from_up in _DENIED.values():
        block = [(_LD_W_ABS, 0, 0, _NR_OFFSET)]
        if from_up is not None:
            block.append((_JGE_K, len(numbers) + 1, 0, from_up))  # to the refusal
        for i, number in enumerate(numbers):
            block.append((_JEQ_K, len(numbers) - i, 0, number))  # to the refusal
        block += [(_RET_K, 0, 0, _RET_ALLOW), (_RET_K, 0, 0, refuse)]
        blocks.append(block)
    # a check of the arch before each block: jump over the block unless it is its arch
    out: list[tuple[int, int, int, int]] = []
    for arch, block in zip(_DENIED, blocks, strict=True):
        out += [(_LD_W_ABS, 0, 0, _ARCH_OFFSET), (_JEQ_K, 0, len(block), arch), *block]
    return [*out, (_RET_K, 0, 0, refuse)]  # an architecture no block names


def install() -> tuple[bool, str]:
    """(installed, what holds or why not), in the calling process and all its threads."""
    number = _SYS_SECCOMP.get(platform.machine())
    if number is None:
        return False, f"no seccomp filter for {platform.machine()}"
    code = program()
    instructions = (_Instruction * len(code))(*[_Instruction(*i) for i in code])
    prog = _Program(len(code), instructions)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return False, f"prctl(NO_NEW_PRIVS): {os.strerror(ctypes.get_errno())}"
    if libc.syscall(number, _SECCOMP_SET_MODE_FILTER, _SECCOMP_FILTER_FLAG_TSYNC,
                    ctypes.byref(prog)) != 0:
        return False, f"seccomp: {os.strerror(ctypes.get_errno())}"
    return True, "seccomp: kernel keyrings refused (add_key, request_key, keyctl)"
