"""The seccomp filter's program (no filter is installed here: see test_containment)."""

from __future__ import annotations

import errno

import pytest

from cudal1_evaluator.isolation import syscalls


def test_every_jump_lands_inside_the_program_and_forward() -> None:
    program = syscalls.program()
    for i, (code, true, false, _k) in enumerate(program):
        assert 0 <= true <= 255 and 0 <= false <= 255
        if code & 0x07 == 0x05:  # a jump: both of its targets are instructions after it
            assert i + 1 + max(true, false) < len(program)
    assert program[-1][0] == 0x06  # it ends on a return


def test_the_assembler_refuses_a_label_twice_and_a_jump_it_cannot_encode() -> None:
    ret = (0x06, "", "", 0)
    with pytest.raises(ValueError, match="twice"):
        syscalls._assemble(["a", ret, "a", ret])
    far: list[tuple[int, str, str, int] | str] = [(0x15, "end", "", 1)]
    far += [ret] * 300 + ["end", ret]
    with pytest.raises(ValueError, match="out of range"):
        syscalls._assemble(far)
    back: list[tuple[int, str, str, int] | str] = ["top", ret, (0x15, "top", "", 1)]
    with pytest.raises(ValueError, match="out of range"):
        syscalls._assemble(back)


def _run(program: list[tuple[int, int, int, int]], arch: int, nr: int,
         args: tuple[int, ...] = ()) -> int:
    """What ``program`` returns for a call (a classic BPF interpreter of the five opcodes it
    uses, over ``struct seccomp_data``: nr, arch, then each argument's low and high words)."""
    words = {0: nr, 4: arch}
    for i, value in enumerate((*args, 0, 0, 0, 0, 0, 0)[:6]):
        words[16 + 8 * i], words[20 + 8 * i] = value & 0xFFFFFFFF, value >> 32
    acc, pc = 0, 0
    while True:
        code, true, false, k = program[pc]
        if code == 0x20:  # load a word
            acc, pc = words.get(k, 0), pc + 1
        elif code == 0x06:
            return k
        else:
            hit = {0x15: acc == k, 0x35: acc >= k, 0x45: bool(acc & k)}[code]
            pc += 1 + (true if hit else false)


@pytest.mark.parametrize("strict", [False, True])
def test_userfaultfd_is_refused_on_every_architecture_by_the_call_and_by_the_device(
        strict: bool) -> None:
    """Round 41: a userfaultfd lets a candidate serve the faults of the parent's reads of
    its output pages: it learns where the parent samples, as the parent reads. The call and
    ``/dev/userfaultfd``'s ``USERFAULTFD_IOC_NEW`` answer ENOSYS on every architecture; other
    calls and ioctls (``TCGETS``) still reach the kernel."""
    program = syscalls.program(strict)
    refused = syscalls._RET_ERRNO | errno.ENOSYS
    for arch in syscalls._ARCHES:
        assert _run(program, arch.audit, arch.userfaultfd, (1,)) == refused, hex(arch.audit)
        assert _run(program, arch.audit, arch.ioctl, (3, 0xAA00, 0)) == refused
        assert _run(program, arch.audit, arch.ioctl, (3, 0x5401, 0)) == syscalls._RET_ALLOW
        assert _run(program, arch.audit, arch.keys[0]) == refused  # the interpreter agrees
    x86_64 = syscalls._ARCHES[0]
    assert (x86_64.userfaultfd, syscalls._ARCHES[1].userfaultfd) == (323, 374)
    assert syscalls._ARCHES[2].userfaultfd == 282
    assert _run(program, x86_64.audit, 0) == syscalls._RET_ALLOW  # read
    assert _run(program, x86_64.audit, 9) == syscalls._RET_ALLOW  # mmap
