"""The end of a timed window, decided by the referee: where each output lies, and proof that
it was there when the window closed.

A runner says where each output of its window lies (in its own memory: an IPC handle and an
offset; otherwise in the referee's buffer it copied it into). Nothing of that is believed:
the referee maps the allocation itself (the driver checks the handle), checks the bounds
against the mapping, refuses a handle another runner showed first, and reads the bytes with
its own kernels. The seal reads a few hundred bytes of the outputs of the window's last call
and of calls drawn then, at places drawn then (``WindowSeal.probe``); the check, later, with
the runner stopped and the GPU idle, places every output and reads the same places again
(``late``): work still writing the outputs after the window closed changes
them. Outputs of different calls that share memory (``reused``) are a later call's output,
not theirs: a byte read of a call at its step that the output of a call after it lies over
is expected to change, and is not ``late`` (no other byte is, whichever calls are reused: a
seal's sample, read after every call, never is); a reused call is never judged, and the
parent times the window again copying every output (or rejects it under every reward policy
when it is already copying).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any

import torch

from cudal1_evaluator.wire.cuda_ipc import HANDLE_BYTES, Mapper, view_at
from cudal1_evaluator.wire.delivery import (
    MAX_HANDLES,
    SAMPLED_CALLS,
    LastWriters,
    is_index,
    overwritten,
)

SAMPLES = 256  # bytes read per output at the seal, at places the runner cannot predict
Key = tuple[object, ...]


@dataclass
class Placed:
    """One output as the referee reads it: the tensor compared, and the bytes it lies in."""

    tensor: torch.Tensor
    source: torch.Tensor  # uint8: the mapped allocation, or the referee's own buffer
    start: int
    length: int
    key: Key  # the same memory has the same key


@dataclass
class Sample:
    """Bytes read at random places of one memory once call ``after`` was done (the seal's:
    after the window's last call)."""

    source: torch.Tensor
    where: torch.Tensor
    seen: torch.Tensor
    memory: Key  # as ``WindowSeal.spans`` names it
    after: int

    def moved(self) -> list[int]:
        """The sampled places whose byte differs now from what was read."""
        return self.where[self.source.index_select(0, self.where) != self.seen].tolist()

    def unexcused(self, moved: list[int], writers: LastWriters | None) -> bool:
        """Whether a byte at ``moved`` changed where no output of a call after ``after``
        lies (``writers``: this memory's; None: no output of the window lies in it)."""
        return any(writers is None or not writers.later(place, self.after) for place in moved)


@dataclass
class WindowSeal:
    """One runner's window as its seal left it: the sets in its slots, the runner's word on
    where the outputs lie, the calls sampled at the seal and what was read there."""

    runner: int
    ids: list[int]
    buffers: list[list[torch.Tensor]]  # the referee's own output buffers, per slot
    segments: list[tuple[bytes, torch.Tensor] | None]
    where: dict[int, Any]  # call -> the runner's word on its outputs (at first the drawn ones)
    placed: dict[int, list[Placed]] = field(default_factory=dict)  # call -> its outputs
    samples: list[Sample] = field(default_factory=list)
    changed: bool = False  # the word at ``place`` moved an output the seal had read

    def probe(self, placer: Placer, calls: list[int], gen: torch.Generator, after: int) -> None:
        """Place the outputs of ``calls`` and read ``SAMPLES`` bytes of each at random places
        (one gather per memory), once call ``after`` is done (a step's: the call it reads;
        the seal's: the window's last)."""
        self.probe_placed([p for j in calls for p in self.call(placer, j)], gen, after)

    def probe_placed(self, placed: list[Placed], gen: torch.Generator, after: int) -> None:
        """One gather per memory."""
        groups: dict[Key, list[Placed]] = {}
        for i, p in enumerate(placed):
            if p.length > 0:
                groups.setdefault(p.key if p.key != ("own",) else ("own", i), []).append(p)
        for members in groups.values():
            starts = torch.tensor([p.start for p in members], dtype=torch.int64)
            lengths = torch.tensor([p.length for p in members], dtype=torch.int64)
            draws = torch.rand(len(members), SAMPLES, generator=gen, dtype=torch.float64)
            offsets = (draws * lengths[:, None]).to(torch.int64)
            offsets = torch.minimum(offsets, (lengths - 1)[:, None])
            source = members[0].source
            where = (starts[:, None] + offsets).reshape(-1).to(source.device, non_blocking=True)
            self.samples.append(Sample(source, where, source.index_select(0, where),
                                       _memory(members[0]), after))

    def probe_nothing(self, buffer: torch.Tensor, gen: torch.Generator) -> None:
        """An empty window's seal: the same gathers a full one makes, on our own buffer, so
        the hand-off the empty windows measure holds the seal's own cost."""
        flat = buffer.reshape(-1).view(torch.uint8)
        self.probe_placed([Placed(buffer, flat, 0, flat.numel(), ("own",))
                           for _ in range(SAMPLED_CALLS + 1)], gen, -1)

    def call(self, placer: Placer, j: int) -> list[Placed]:
        """Call ``j``'s outputs, placed (once)."""
        if j not in self.placed:
            said = self.where.get(j)
            self.placed[j] = [placer.one(self.runner, j, i, buf, self.segments, said)
                              for i, buf in enumerate(self.buffers[j])]
        return self.placed[j]

    def place_all(self, placer: Placer, handles: Any, where: Any) -> None:
        """Every call's word, after the clock (the seal had the drawn calls' only): at most
        one allocation an output. The drawn calls stay as the seal placed them; a word that
        places one elsewhere now changes the runner's story after the seal (``changed``:
        every output of the window fails its check)."""
        outputs = sum(len(self.buffers[j]) for j in range(len(self.ids)))
        self.segments = placer.segments(self.runner, handles[:outputs]
                                        if isinstance(handles, list) else None)
        self.where = dict(enumerate(where)) if isinstance(where, list) else {}
        for j, sealed in list(self.placed.items()):
            now = [placer.one(self.runner, j, i, buf, self.segments, self.where.get(j))
                   for i, buf in enumerate(self.buffers[j])]
            if [(p.key, p.start) for p in now] != [(p.key, p.start) for p in sealed]:
                self.changed = True
                self.where, self.segments = {}, []
                return

    def late(self, placer: Placer) -> bool:
        """Whether any sampled byte differs now from what the seal (or a step) read, bar a
        byte that the output of a call after the read lies over: that call wrote it. A byte
        of a reused call that no later output covers changed by other work, and counts."""
        changed = [(sample, moved) for sample in self.samples if (moved := sample.moved())]
        if not changed:
            return False
        spans = self.spans(placer)
        writers = {sample.memory: LastWriters(spans[sample.memory])
                   for sample, _ in changed if sample.memory in spans}
        return any(sample.unexcused(moved, writers.get(sample.memory))
                   for sample, moved in changed)

    def reused(self, placer: Placer) -> set[int]:
        """The calls whose output memory a later call's output overlaps."""
        return set().union(*(overwritten(items) for items in self.spans(placer).values()))

    def spans(self, placer: Placer) -> dict[Key, list[tuple[int, int, int]]]:
        """Every call's outputs as ``(start, stop, call)`` byte spans, by memory (an empty
        output holds nothing a later call could take: left out)."""
        spans: dict[Key, list[tuple[int, int, int]]] = {}
        for j in range(len(self.ids)):
            for p in self.call(placer, j):
                if p.length > 0:
                    spans.setdefault(_memory(p), []).append((p.start, p.start + p.length, j))
        return spans

    def memory(self) -> set[Key]:
        return {p.key for call in self.placed.values() for p in call} | \
            {("ipc", seg[0]) for seg in self.segments if seg is not None}


class Placer:
    """Where a runner's outputs lie, decided by the referee from the runner's word."""

    def __init__(self, device: torch.device) -> None:
        self.mapper = Mapper(device) if device.type == "cuda" else None
        self.owners: dict[bytes, int] = {}  # an allocation's handle -> the runner that showed it
        self.mapped_by: dict[int, int] = {}  # where it is mapped here -> that runner

    def segments(self, runner: int, handles: Any) -> list[tuple[bytes, torch.Tensor] | None]:
        if self.mapper is None or not isinstance(handles, list):
            return []
        found: list[tuple[bytes, torch.Tensor] | None] = []
        for text in handles[:MAX_HANDLES]:
            handle = _handle(text)
            owner = self.owners.setdefault(handle, runner) if handle else None
            segment = self.mapper.segment(handle) if handle and owner == runner else None
            if segment is not None and \
                    self.mapped_by.setdefault(segment.data_ptr(), runner) != runner:
                segment = None  # another runner's allocation under other handle bytes
            found.append((handle, segment) if handle and segment is not None else None)
        return found

    def one(self, runner: int, j: int, i: int, buf: torch.Tensor,
             segments: list[tuple[bytes, torch.Tensor] | None], said: Any) -> Placed:
        loc = said[i] if isinstance(said, list) and i < len(said) else None
        if isinstance(loc, list) and len(loc) == 2 and is_index(loc[0], len(segments)) and \
                segments[loc[0]] is not None:
            handle, segment = segments[loc[0]]  # type: ignore[misc]
            view = view_at(segment, loc[1], buf)
            if view is not None:
                size = buf.numel() * buf.element_size()
                return Placed(view, segment, int(loc[1]), size, ("ipc", handle))
        flat = buf.reshape(-1).view(torch.uint8)
        return Placed(buf, flat, 0, flat.numel(), ("slot", runner, j, i))

    def forget(self, keep: set[Key]) -> None:
        """Unmap allocations no live window reads (when more than a few are open)."""
        if self.mapper is not None:
            keep_open = {k[1] for k in keep if k and k[0] == "ipc"}
            for ptr in self.mapper.trim(keep_open):  # type: ignore[arg-type]
                self.mapped_by.pop(ptr, None)  # a later mapping may land there

    def close(self) -> None:
        if self.mapper is not None:
            self.mapper.close()


def _memory(p: Placed) -> Key:
    """The memory an output lies in: mapped memory by where it is mapped, not by the handle
    that named it (two handles of one allocation are one memory)."""
    return ("mem", p.source.data_ptr()) if p.key[0] == "ipc" else p.key


def _handle(text: object) -> bytes | None:
    try:
        raw = base64.b64decode(str(text), validate=True)
    except (ValueError, binascii.Error):
        return None
    return raw if len(raw) == HANDLE_BYTES else None
