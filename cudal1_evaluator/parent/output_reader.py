"""Host outputs read out of a runner's memory by the parent: the CPU's in-place delivery.

On a GPU the referee reads each output where the runner's module left it (CUDA IPC). On a CPU
the referee cannot reach a sibling's memory, and a copy the runner makes into a buffer it can
map is the candidate's own work: it can make that copy free (compute into the buffer and
return memory at its address, red team round 7). So the runner only says where each output
lies, and the parent, an ancestor of every runner (the only process allowed to read their
memory, ``process_vm_readv``), copies the bytes into the referee's own output buffers, which
lie in the referee's private exchange dir: no runner can map them. Both sides pay the same
copy, made by trusted code, inside the window. Nothing the runner says is believed: a place
of the wrong size, an address it does not own, memory it made unreadable all leave the
referee's poisoned buffer as it was (the output then fails its check). Torch-free.
"""

from __future__ import annotations

import bisect
import contextlib
import ctypes
import errno
import mmap
import operator
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cudal1_evaluator.wire.delivery import LastWriters, overwritten

IOV_MAX = 1024  # iovecs one process_vm_readv takes
SAMPLED_ELEMENTS = 256  # whole elements of each output read when its call says it is done
# (one iovec each: < IOV_MAX)
ADDRESS_END = 1 << 63  # no place at or past this is a user-space address


class _Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


_libc = ctypes.CDLL(None, use_errno=True)
_readv = getattr(_libc, "process_vm_readv", None)
if _readv is not None:
    _readv.argtypes = [ctypes.c_int, ctypes.POINTER(_Iovec), ctypes.c_ulong,
                       ctypes.POINTER(_Iovec), ctypes.c_ulong, ctypes.c_ulong]
    _readv.restype = ctypes.c_ssize_t


def may_read(pid: int) -> bool:
    """Whether this process may read ``pid``'s memory: the syscall exists and the kernel lets
    it through (ptrace rules, Yama, a seccomp profile). Address 0 is never mapped, so a
    permitted read fails with EFAULT and a refused one with EPERM (or ENOSYS)."""
    if _readv is None:
        return False
    target = ctypes.create_string_buffer(1)
    local = (_Iovec * 1)(_Iovec(ctypes.addressof(target), 1))
    remote = (_Iovec * 1)(_Iovec(0, 1))
    if _readv(pid, local, 1, remote, 1, 0) >= 0:
        return True
    return ctypes.get_errno() == errno.EFAULT


@dataclass
class _Buffer:
    """One output buffer of the referee's, mapped here."""

    mapped: mmap.mmap
    anchor: ctypes.c_char | None  # holds the mapping's address (released before the unmap)
    address: int
    size: int
    width: int = 1  # bytes of one element


@dataclass
class StepSample:
    """Whole elements of output ``output`` of call ``call``, read at ``address`` in the
    runner's memory when the call said it was done: ``seen`` holds ``width`` bytes of each
    element of ``elements``, in order."""

    call: int
    output: int
    buf: _Buffer
    address: int
    elements: list[int]
    seen: bytes

    def offsets(self) -> list[int]:
        """The sampled bytes' offsets in the output, in the order of ``seen``."""
        width = self.buf.width
        return [k * width + b for k in self.elements for b in range(width)]

    def word(self) -> list[Any]:
        """What the referee judges it by (``sampled``): call, output, elements, bytes."""
        return [self.call, self.output, self.elements, self.seen.hex()]


class OutputReader:
    """The referee's output buffers of one runner's pool (slot -> outputs), mapped by the
    parent, and the copy of a window's outputs into them."""

    def __init__(self, slots: list[list[tuple[str, int]]],
                 widths: list[list[int]] | None = None) -> None:
        """``widths``: the bytes of one element of each output (1 where not given)."""
        self.slots: list[list[_Buffer]] = [
            [_map(path, size, widths[j][i] if widths else 1)
             for i, (path, size) in enumerate(outputs)] for j, outputs in enumerate(slots)]

    def placed(self, at: Any, calls: int, first: int = 0
               ) -> list[tuple[int, _Buffer, list[int]]]:
        """(call, buffer, place) for each output of calls ``first..calls-1`` whose place
        ``at`` names fits its buffer: at most one place an output, whatever the reply holds."""
        return [(j, buf, place) for j in range(first, min(calls, len(self.slots)))
                for _, buf, place in self.outputs_of(at, j)]

    def outputs_of(self, at: Any, j: int) -> list[tuple[int, _Buffer, list[int]]]:
        """(output, buffer, place) for each output of call ``j`` whose place fits."""
        if j >= len(self.slots):
            return []
        return [(i, buf, place)
                for i, (buf, place) in enumerate(zip(self.slots[j], _places(at, j), strict=False))
                if _fits(place, buf)]

    def read(self, pid: int, placed: list[tuple[int, _Buffer, list[int]]]) -> int:
        """The placed outputs from ``pid``'s memory into the referee's buffers; how many
        arrived whole."""
        pairs = [(buf, place) for _, buf, place in placed]
        whole = 0
        for start in range(0, len(pairs), IOV_MAX):
            chunk = pairs[start:start + IOV_MAX]
            if _copy(pid, chunk) == sum(buf.size for buf, _ in chunk):
                whole += len(chunk)
            else:  # one bad place cuts the rest of its chunk short: each alone, to know
                whole += sum(_copy(pid, [pair]) == pair[0].size for pair in chunk)
        return whole

    def close(self) -> None:
        for outputs in self.slots:
            for buf in outputs:
                buf.anchor = None
                buf.mapped.close()
        self.slots = []


def _map(path: str, size: int, width: int = 1) -> _Buffer:
    fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        mapped = mmap.mmap(fd, max(size, 1))
    finally:
        os.close(fd)
    anchor = ctypes.c_char.from_buffer(mapped)
    return _Buffer(mapped, anchor, ctypes.addressof(anchor), size, width)


def _places(at: Any, j: int) -> list[Any]:
    if not isinstance(at, list) or j >= len(at) or not isinstance(at[j], list):
        return []
    return list(at[j])


def _fits(place: Any, buf: _Buffer) -> bool:
    """A place of exactly the buffer's size, not empty: [address, bytes], plain ints that a
    user-space address can be."""
    return (isinstance(place, list) and len(place) == 2
            and all(type(v) is int and 0 <= v < ADDRESS_END for v in place)
            and place[1] == buf.size and buf.size > 0)


def _read_bytes(pid: int, address: int, offsets: list[int], width: int = 1) -> bytes:
    """The ``width`` bytes at ``address + offset`` for each offset, in ``pid``'s memory (a
    byte that cannot be read comes back as 0: the sample then differs from the output, which
    is the runner's to have made readable)."""
    count = len(offsets)
    got = ctypes.create_string_buffer(count * width)
    if _readv is None or not count:
        return got.raw
    local = (_Iovec * 1)(_Iovec(ctypes.addressof(got), count * width))
    words = (ctypes.c_uint64 * (2 * count))()  # the remote iovecs as (base, len) words:
    words[0::2] = [address + o for o in offsets]  # one slice each, not an object a place
    words[1::2] = [width] * count
    _readv(pid, local, 1, ctypes.cast(words, ctypes.POINTER(_Iovec)), count, 0)
    return got.raw


def _unexcused(writers: LastWriters, j: int, address: int, offsets: list[int], now: bytes,
               seen: bytes) -> bool:
    """Whether a byte of call ``j``'s output at ``address`` changed where no later call's
    output lies."""
    return any(a != b and not writers.later(address + o, j)
               for o, a, b in zip(offsets, now, seen, strict=True))


def _bytes_at(mapped: mmap.mmap, offsets: list[int]) -> bytes:
    picked = operator.itemgetter(*offsets)(mapped) if offsets else ()
    return bytes(picked if isinstance(picked, tuple) else (picked,))


def _copy(pid: int, pairs: list[tuple[_Buffer, list[int]]]) -> int:
    if _readv is None or not pairs:
        return 0
    local = (_Iovec * len(pairs))(*[_Iovec(buf.address, buf.size) for buf, _ in pairs])
    remote = (_Iovec * len(pairs))(*[_Iovec(place[0], place[1]) for _, place in pairs])
    return max(0, int(_readv(pid, local, len(pairs), remote, len(pairs), 0)))


class HostOutputs:
    """The parent's side of host delivery for one evaluation: the referee's output buffers
    of each runner kept in the referee's own dir, each window's outputs read in, and which
    calls a later call overwrote (their outputs share its memory). Off on a GPU, and where the
    kernel refuses the parent a runner's memory (then runners copy into buffers they map)."""

    def __init__(self, enabled: bool, referee_dir: Path) -> None:
        self.enabled = enabled
        self.referee_dir = referee_dir
        self.readable: bool | None = None  # decided on the first runner (the reference's)
        self.readers: dict[str, OutputReader] = {}
        self.workers: dict[str, int] = {}
        self.overwritten: dict[str, list[int]] = {}
        self.held_over: dict[str, list[int]] = {}  # calls whose output lies in held memory
        self._read: dict[str, list[tuple[int, int, int]]] = {}  # this window's (start, end, call)
        self._last: dict[str, list[tuple[int, int]]] = {}  # the last window's, merged
        self._copies: dict[str, bool] = {}  # whether the last window's places were copies
        self.late: dict[str, list[int]] = {}  # calls written after they said they were done
        self._samples: dict[str, list[StepSample]] = {}  # this window's, as taken
        self._steps: dict[str, list[StepSample]] = {}  # the last settled window's
        self._set_files: dict[str, list[tuple[tuple[int, int], int]]] = {}  # per call:
        # its set's file, (dev, ino), and the bytes it was made with
        self._dir: Path | None = None

    def pool_fields(self, worker: int | None) -> dict[str, str]:
        """What a pool request adds: the dir for the outputs, when the parent reads them."""
        if not self.enabled or worker is None:
            return {}
        if self.readable is None:
            self.readable = may_read(worker)
        if not self.readable:
            return {}
        if self._dir is None:
            self._dir = self.referee_dir / f"outs-{os.urandom(8).hex()}"
            self._dir.mkdir(mode=0o700)
        return {"out_dir": str(self._dir)}

    def attached(self, side: str, worker: int | None, slots: Any) -> Any:
        """The pool as the runner gets it: each output buffer replaced by its description
        alone ("away"); the buffers mapped here."""
        old = self.readers.pop(side, None)
        if old is not None:
            old.close()
        if worker is None or not isinstance(slots, list):
            return slots
        rows = [[(str(d["path"]), _bytes(d), int(d["numel"])) for d in slot["outputs"]]
                for slot in slots]  # each output file sized once
        self.readers[side] = OutputReader([[(path, size) for path, size, _ in row] for row in rows],
                                          [[_width(numel, size) for _, size, numel in row]
                                           for row in rows])
        self.workers[side] = worker
        self._set_files.pop(side, None)
        return [{"inputs": slot["inputs"],
                 "outputs": [{"kind": "away", "dtype": d["dtype"], "shape": d["shape"],
                              "numel": d["numel"]} for d in slot["outputs"]]}
                for slot in slots]

    def read(self, side: str, reply: Any, calls: int) -> None:
        """A window's outputs from the runner's memory into the referee's buffers (on the
        clock: the copy is the hand-off, the same for both sides)."""
        reader = self.readers.get(side)
        if reader is None:
            return
        placed = reader.placed(reply.get("at") if isinstance(reply, dict) else None, calls)
        reader.read(self.workers[side], placed)
        self._read[side] = [(place[0], place[0] + place[1], j) for j, _, place in placed]

    def sample_call(self, side: str, at: list[Any], j: int) -> None:
        """Call ``j``'s outputs read at ``SAMPLED_ELEMENTS`` whole elements drawn now, as
        soon as the runner says the call is done and before the next call's set is handed
        over (the runner still runs: a torn read only hurts it). The whole outputs are read
        after the window with the runner stopped (``read``); a sampled byte that differs then
        was written after the call said it was done (``late``). A call whose output is gone
        by then (freed by a later call) is judged on this sample (``step_samples``)."""
        reader = self.readers.get(side)
        if reader is None:
            return
        if j == 0:
            self._samples[side] = []
        for i, buf, place in reader.outputs_of(at, j):
            elements = unpredictable_offsets(buf.size // buf.width, SAMPLED_ELEMENTS)
            seen = _read_bytes(self.workers[side], place[0],
                               [k * buf.width for k in elements], buf.width)
            self._samples[side].append(StepSample(j, i, buf, place[0], elements, seen))

    def step_samples(self, side: str, calls: Iterable[int]) -> list[list[Any]]:
        """The last settled window's step samples of ``calls``, as the referee judges them."""
        wanted = set(calls)
        return [s.word() for s in self._steps.get(side, []) if s.call in wanted]

    def note_sets(self, side: str, fds: Sequence[int]) -> None:
        """The files of a window's input sets, in call order (handed to the runner one call
        at a time): an output that is a view of its own call's input lies in its set's."""
        if side not in self.readers:
            return
        self._set_files[side] = [((st.st_dev, st.st_ino), st.st_size)
                                 for st in map(os.fstat, fds)]

    def settle(self, side: str, *, window: bool = True, copies: bool = False) -> None:
        """After the clock: which calls' outputs a later call overwrote, and (``window``)
        which lie where the last window's outputs lay, which the runner still holds (its own
        copies when ``copies``: the first window of copies is compared with none, since a
        candidate may free its own outputs, and those of the window before were its own).
        Never raises: what the candidate makes unreadable counts against it."""
        if side not in self.readers:
            return
        spans = self._read.pop(side, [])
        self.overwritten[side] = sorted(overwritten(spans))
        self._steps[side] = self._samples.pop(side, [])
        self.late[side] = _late(self._steps[side], spans)
        if not window:
            return
        if self._copies.get(side, copies) != copies:
            self._last.pop(side, None)
        self._copies[side] = copies
        try:
            self.held_over[side] = self._held_over(side, spans)
        except Exception:  # the runner's maps are the candidate's to shape
            self.held_over[side] = sorted({j for _, _, j in spans})
        self._last[side] = _merged((start, end) for start, end, _ in spans)

    def _held_over(self, side: str, spans: list[tuple[int, int, int]]) -> list[int]:
        """Calls whose output overlaps one of the last window's, except an output inside the
        bytes its own call's set file was made with, in the runner's shared mapping of that
        file (a view of its input; a write into it is the referee's input check's to see).
        Any other input file is memory the runner holds: a pool input slot's file is the
        same in every window (round 40), an earlier call's set is not this call's input."""
        last = self._last.get(side, [])
        starts = [start for start, _ in last]
        hits = []
        for start, end, j in spans:
            k = bisect.bisect_right(starts, start) - 1  # the last span starting at or before
            if (k >= 0 and last[k][1] > start) or (k + 1 < len(last) and starts[k + 1] < end):
                hits.append((start, end, j))
        if not hits:
            return []
        own = self._set_files.get(side, [])
        views = file_views(self.workers[side], dict(own))
        return sorted({j for start, end, j in hits
                       if j >= len(own) or not any(s <= start and end <= e
                                                   for s, e in views.get(own[j][0], []))})

    def close(self) -> None:
        for reader in self.readers.values():
            reader.close()
        self.readers = {}


def _late(samples: list[StepSample], spans: list[tuple[int, int, int]]) -> list[int]:
    """Calls whose outputs, read whole after the window from where they were sampled,
    differ at a sampled place from what the sample read when the call said it was done,
    bar a place the output of a later call lies over (that call wrote it: a call whose
    memory a later call took is ``overwritten``; its other bytes still count)."""
    read = {(start, j) for start, _end, j in spans}
    moved = [(s, now) for s in samples if (s.address, s.call) in read
             and (now := _bytes_at(s.buf.mapped, s.offsets())) != s.seen]
    writers = LastWriters(spans) if moved else None
    return sorted({s.call for s, now in moved
                   if writers is None
                   or _unexcused(writers, s.call, s.address, s.offsets(), now, s.seen)})


def _merged(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted, disjoint: overlapping or touching spans joined."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def file_views(pid: int, files: dict[tuple[int, int], int]
               ) -> dict[tuple[int, int], list[tuple[int, int]]]:
    """Where ``pid`` maps the bytes each of ``files`` was made with, shared
    (``/proc/PID/maps``, the kernel's word: a private, copy-on-write mapping of the same file
    is not one, nor what a file grew by since). Pieces of one file mapped next to each other
    are joined."""
    try:
        lines = Path(f"/proc/{pid}/maps").read_bytes().splitlines()
    except OSError:
        return {}
    pieces: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for line in lines:
        fields = line.split(maxsplit=5)
        if len(fields) < 5 or fields[1][3:4] != b"s":
            continue
        with contextlib.suppress(ValueError):
            major, minor = (int(x, 16) for x in fields[3].split(b":"))
            key = (os.makedev(major, minor), int(fields[4]))
            size = files.get(key)
            if size is None:
                continue
            start, end = (int(x, 16) for x in fields[0].split(b"-"))
            offset = int(fields[2], 16)  # the file offset mapped at ``start``
            end = min(end, start + max(size - offset, 0))
            if end > start:
                pieces.setdefault(key, []).append((start, end))
    return {key: _merged(spans) for key, spans in pieces.items()}


def _bytes(desc: Any) -> int:
    """The bytes of a described buffer: its file's size (one element's worth when empty)."""
    return os.path.getsize(str(desc["path"])) if int(desc["numel"]) > 0 else 0


def _width(numel: int, size: int) -> int:
    """The bytes of one element of a buffer of ``size`` bytes holding ``numel`` of them."""
    return size // numel if numel > 0 and size % numel == 0 and size else 1


def unpredictable_offsets(size: int, count: int) -> list[int]:
    """``count`` places in ``size`` bytes, straight from the OS's random source: a seeded
    generator's state can be recovered from enough of its draws, and a runner can see which
    of its pages the parent read (round 40)."""
    if size <= 0:
        return []
    raw = os.urandom(8 * count)
    return [int.from_bytes(raw[i:i + 8], "little") % size for i in range(0, 8 * count, 8)]
