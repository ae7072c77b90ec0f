"""The seccomp filter's program (no filter is installed here: see test_containment)."""

from __future__ import annotations

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
