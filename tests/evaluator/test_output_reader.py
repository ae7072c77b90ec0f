"""The parent reads host outputs out of a runner's memory (real processes, CPU).

A child process stands in for a runner: it fills memory of its own with known bytes, maps a
file shared and the same file privately, prints where, and waits. The parent side
(``parent/output_reader.py``) must read exactly the named bytes, leave its buffer as it was
for a place it cannot trust, and tell a shared mapping of a pool input from a private copy.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cudal1_evaluator.parent import output_reader
from cudal1_evaluator.parent.output_reader import HostOutputs, OutputReader

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")

RUNNER = textwrap.dedent("""
    import ctypes, json, mmap, os, sys
    data = ctypes.create_string_buffer(bytes(range(256)) * 16, 4096)
    fd = os.open(sys.argv[1], os.O_RDWR)
    shared = mmap.mmap(fd, 4096, mmap.MAP_SHARED)
    private = mmap.mmap(fd, 4096, mmap.MAP_PRIVATE)
    def at(m):
        return ctypes.addressof(ctypes.c_char.from_buffer(m))
    print(json.dumps({"data": ctypes.addressof(data), "shared": at(shared),
                      "private": at(private)}), flush=True)
    sys.stdin.read()
""")


@pytest.fixture
def runner(tmp_path: Path) -> Iterator[tuple[int, dict[str, int], Path]]:
    infile = tmp_path / "input.bin"
    infile.write_bytes(b"\x07" * 4096)
    proc = subprocess.Popen([sys.executable, "-c", RUNNER, str(infile)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    places = json.loads(proc.stdout.readline())
    try:
        yield proc.pid, places, infile
    finally:
        proc.kill()
        proc.wait()


def _buffer(tmp_path: Path, name: str, size: int) -> Path:
    path = tmp_path / name
    path.write_bytes(b"\xff" * size)  # poisoned, as the referee leaves its output buffers
    return path


def test_the_parent_may_read_its_childs_memory(runner: tuple[int, dict[str, int], Path]) -> None:
    pid, _, _ = runner
    assert output_reader.may_read(pid)


def test_named_bytes_are_read_and_a_place_of_the_wrong_size_leaves_the_buffer(
        runner: tuple[int, dict[str, int], Path], tmp_path: Path) -> None:
    pid, places, _ = runner
    good, wrong, unowned = (_buffer(tmp_path, f"out{i}.bin", 4096) for i in range(3))
    reader = OutputReader([[(str(good), 4096)], [(str(wrong), 4096)], [(str(unowned), 4096)]])
    at: list[Any] = [[[places["data"], 4096]], [[places["data"], 2048]], [[8, 4096]]]
    try:
        assert reader.read(pid, reader.placed(at, 3)) == 1
    finally:
        reader.close()
    assert good.read_bytes() == bytes(range(256)) * 16
    assert wrong.read_bytes() == b"\xff" * 4096  # not its size: never read
    assert unowned.read_bytes() == b"\xff" * 4096  # not mapped there: the read fails whole


def test_a_reply_names_at_most_one_place_an_output_and_none_that_is_no_address(
        tmp_path: Path) -> None:
    reader = OutputReader([[(str(_buffer(tmp_path, "out.bin", 16)), 16)]])
    try:
        flood: list[Any] = [[[4096 * (i + 1), 16] for i in range(100_000)]]
        assert len(reader.placed(flood, 1)) == 1
        for bad in ([1 << 64, 16], [-4096, 16], [4096, 0], [4096.0, 16], [True, 16]):
            assert reader.placed([[bad]], 1) == []
    finally:
        reader.close()


def test_only_a_shared_mapping_of_the_bytes_the_input_was_made_with_counts(
        runner: tuple[int, dict[str, int], Path]) -> None:
    pid, places, infile = runner
    st = os.stat(infile)
    key = (st.st_dev, st.st_ino)
    views = output_reader.file_views(pid, {key: 4096}).get(key, [])
    assert any(s <= places["shared"] < e for s, e in views)
    assert not any(s <= places["private"] < e for s, e in views)  # copy-on-write: its own
    made_smaller = output_reader.file_views(pid, {key: 2048}).get(key, [])
    assert (places["shared"], places["shared"] + 2048) in made_smaller  # not what it grew by


def test_an_output_where_the_last_windows_lay_is_held_over_unless_it_is_the_input(
        runner: tuple[int, dict[str, int], Path], tmp_path: Path) -> None:
    """The runner maps the file shared: here it is the set file of call 0 in every window
    (a view of its own input), which the exemption needs (the next test)."""
    pid, places, infile = runner
    out = _buffer(tmp_path, "out.bin", 4096)
    referee = tmp_path / "referee"
    referee.mkdir()
    host = HostOutputs(True, referee)
    desc = {"path": str(out), "dtype": "uint8", "shape": [4096], "numel": 4096}
    host.attached("candidate", pid, [{"inputs": [], "outputs": [desc]}])
    fd = os.open(infile, os.O_RDONLY)
    try:
        for name, held_over in (("data", []), ("data", [0]), ("shared", []), ("shared", []),
                                ("private", []), ("private", [0])):
            host.note_sets("candidate", [fd])
            host.read("candidate", {"at": [[[places[name], 4096]]]}, 1)
            host.settle("candidate")
            assert host.held_over["candidate"] == held_over, name
        host.read("candidate", {"at": [[[places["private"], 4096]]]}, 1)
        host.settle("candidate", window=False)
        assert host.held_over["candidate"] == [0]  # a trial's read is no window: unchanged
        host.read("candidate", {"at": [[[places["private"], 4096]]]}, 1)
        host.settle("candidate", copies=True)  # the first window of copies: nothing to compare
        assert host.held_over["candidate"] == []  # (the candidate may free its own outputs)
        host.read("candidate", {"at": [[[places["private"], 4096]]]}, 1)
        host.settle("candidate", copies=True)
        assert host.held_over["candidate"] == [0]  # copies the runner holds, taken again
    finally:
        os.close(fd)
        host.close()


@pytest.mark.parametrize("file_is", ["a pool input", "another call's set"])
def test_an_output_in_an_input_file_not_its_own_calls_set_is_held_over(
        runner: tuple[int, dict[str, int], Path], tmp_path: Path, file_is: str) -> None:
    """Round 40: the runner's shared mapping of a pool input slot's file (the same file in
    every window) or of another call's set file holds call 0's output in two windows: held
    over. Exempt only as a view of its own call's set (the test above)."""
    pid, places, infile = runner
    referee = tmp_path / "referee"
    referee.mkdir()
    host = HostOutputs(True, referee)
    other = tmp_path / "other.bin"
    other.write_bytes(b"\x01" * 4096)
    descs = [{"path": str(_buffer(tmp_path, f"out{j}.bin", 4096)), "dtype": "uint8",
              "shape": [4096], "numel": 4096} for j in range(2)]
    host.attached("candidate", pid, [{"inputs": [{"path": str(infile)}], "outputs": [d]}
                                     for d in descs])
    fds = [os.open(other, os.O_RDONLY), os.open(infile, os.O_RDONLY)]  # calls 0 and 1
    try:
        for held_over in ([], [0]):
            host.note_sets("candidate", fds if file_is == "another call's set" else fds[:1])
            host.read("candidate", {"at": [[[places["shared"], 4096]]]}, 1)
            host.settle("candidate")
            assert host.held_over["candidate"] == held_over
    finally:
        for fd in fds:
            os.close(fd)
        host.close()


def test_a_sampled_byte_of_an_overwritten_call_counts_late_unless_a_later_output_covers_it(
        tmp_path: Path) -> None:
    """Round 39, host side: call 1's output lies over the top half of call 0's (call 0 is
    ``overwritten``). After call 0's step, call 1 writes its half: not late. A write to the
    bottom half, which no later output covers, is work after call 0 said it was done."""
    memory = ctypes.create_string_buffer(32)  # this process stands in for the runner
    base = ctypes.addressof(memory)
    referee = tmp_path / "referee"
    referee.mkdir()
    outs = [{"path": str(_buffer(tmp_path, f"out{j}.bin", 16)), "dtype": "uint8",
             "shape": [16], "numel": 16} for j in range(2)]
    host = HostOutputs(True, referee)
    host.attached("candidate", os.getpid(), [{"inputs": [], "outputs": [d]} for d in outs])
    at: list[Any] = [[[base, 16]], [[base + 8, 16]]]
    try:
        for late, outside in (([], b""), ([0], b"\x07" * 8)):
            ctypes.memset(base, 1, 16)  # call 0, then its step
            host.sample_call("candidate", at, 0)
            ctypes.memset(base + 8, 2, 16)  # call 1, then its step
            host.sample_call("candidate", at, 1)
            ctypes.memmove(base, outside, len(outside))  # after the window, below call 1's
            host.read("candidate", {"at": at}, 2)
            host.settle("candidate", window=False)
            assert host.overwritten["candidate"] == [0]
            assert host.late["candidate"] == late
    finally:
        host.close()


def test_sample_places_come_from_the_os_random_source_and_stay_in_bounds() -> None:
    from cudal1_evaluator.parent.output_reader import unpredictable_offsets

    drawn = unpredictable_offsets(1000, 256)
    assert len(drawn) == 256 and all(0 <= d < 1000 for d in drawn)
    assert len(set(drawn)) > 100  # not one place repeated
    assert unpredictable_offsets(0, 4) == []


def test_a_step_sample_reads_whole_elements_of_each_output(tmp_path: Path) -> None:
    """Round 40: the step sample reads whole elements (at multiples of the item size), and
    the parent hands them to the referee as [call, output, elements, bytes in hex]."""
    memory = ctypes.create_string_buffer(bytes(range(64)), 64)  # this process as the runner
    base = ctypes.addressof(memory)
    referee = tmp_path / "referee"
    referee.mkdir()
    desc = {"path": str(_buffer(tmp_path, "out.bin", 64)), "dtype": "float32",
            "shape": [16], "numel": 16}
    host = HostOutputs(True, referee)
    host.attached("candidate", os.getpid(), [{"inputs": [], "outputs": [desc]}] * 2)
    at: list[Any] = [[[base, 64]]]
    try:
        host.sample_call("candidate", at, 0)
        host.read("candidate", {"at": at}, 1)
        host.settle("candidate", window=False)
        [[call, output, elements, seen]] = host.step_samples("candidate", [0, 1])
        assert (call, output) == (0, 0) and len(elements) == output_reader.SAMPLED_ELEMENTS
        assert all(0 <= k < 16 for k in elements) and len(set(elements)) > 1
        assert bytes.fromhex(seen) == b"".join(bytes(range(4 * k, 4 * k + 4))
                                               for k in elements)
        assert host.step_samples("candidate", [1]) == []
        assert host.late["candidate"] == []
    finally:
        host.close()
