"""The referee child (trusted): every input set, the strict reference outputs, every check.

It never imports candidate code and never runs anything timed. It exports a pool of buffers
per runner once (``Pool``: input slots and NaN-poisoned output slots, in that runner's own
exchange dir, or on CUDA in its arena, sent as a file descriptor: ``wire.tensor_exchange``).
From seeds the parent sends it makes each input set with the problem's own ``get_inputs`` and
keeps the original; before a window it fills the runner's slots with fresh sets (``fill``).
It computes the strict fp32 reference outputs itself (``expect``), and after a runner's window
freezes ("seals") what the runner left in its slots, then checks it: inputs bit-equal to the
originals, outputs within tolerance. Its seal closes the parent's timed window: outputs count
once it holds a copy.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from cudal1_evaluator.common.batch_compare import compare_many, mutated_many
from cudal1_evaluator.common.compare import (
    Comparison,
    as_tensors,
    clone_inputs,
    compare_outputs,
    describe_tolerance,
    needed_tolerance,
)
from cudal1_evaluator.common.harness import (
    Harness,
    SetupError,
    baseline_settings,
    describe_exception,
    strict_fp32,
)
from cudal1_evaluator.schema import Job
from cudal1_evaluator.trusted import envinfo
from cudal1_evaluator.trusted.sealing import Placer, WindowSeal
from cudal1_evaluator.wire.cuda_ipc import Arena
from cudal1_evaluator.wire.delivery import MAX_HANDLES, is_index
from cudal1_evaluator.wire.report import WorkerReport
from cudal1_evaluator.wire.talk import WINDOW_POLL_S, Handler, Peer, WithFds, serve
from cudal1_evaluator.wire.talk_messages import (
    Agreed,
    Check,
    Checked,
    CheckResult,
    Empty,
    Fill,
    Filled,
    IdleProbe,
    Place,
    PoolRequest,
    PoolSlots,
    Prepare,
    RefereeInfo,
    RefereeInit,
    Seal,
    Sealed,
    SetIds,
    SlotDesc,
    Step,
    StepSamples,
)
from cudal1_evaluator.wire.tensor_exchange import (
    arena_bytes,
    export,
    export_tensor,
    host_set,
    poison_value,
    poisoned_like,
)

CHANGED_MESSAGE = ("its word on where its outputs lie changed after the window closed (an "
                   "output the seal had read was placed elsewhere afterwards)")
REUSED_MESSAGE = "not compared: its output memory holds a later call's output"
LATE_MESSAGE = ("its outputs changed after the window closed: work still writing them when the "
                "runner said it was done (outside the timed window)")


def arena_size(needed: int, old: int | None, free: int) -> int | None:
    """The size of a runner's new arena, or None where its ``old`` one still fits. An outgrown
    arena is never freed while its runner lives (``Referee.pool``), so a new one is at least
    twice the old where the device has room for that (a sixth of what is free, as a window's
    sets may take): what is kept then stays under the new one's size however often the pool
    grows."""
    if old is not None and old >= needed:
        return None
    if old is None:
        return needed
    return max(needed, min(2 * old, free // 6))


class Pool:
    """One runner's shared buffers, exported once: ``calls`` slots, each the inputs of one call
    and NaN-poisoned buffers for its outputs. Before each window the referee fills the slots
    with fresh input sets and poisons the outputs; opening the buffers is no part of a window."""

    def __init__(self, inputs: list[Any], outputs: list[torch.Tensor], calls: int,
                 xdir: Path, dev: torch.device, out_dir: Path | None = None,
                 arena: Arena | None = None) -> None:
        """On CUDA every buffer lies in ``arena`` (taken from its start) where it fits, else
        in a new one (``arena_size``)."""
        self.inputs: list[list[Any]] = []
        self.outputs: list[list[torch.Tensor]] = []
        self.descs: list[SlotDesc] = []
        self.files: list[str] = []
        self.arena = None
        if dev.type == "cuda":
            needed = calls * arena_bytes([*inputs, *outputs])
            size = arena_size(needed, arena.size if arena is not None else None,
                              torch.cuda.mem_get_info(dev)[0])
            if size is not None:
                arena = Arena(dev, size)
            assert arena is not None  # arena_size gives a size wherever there was none
            self.arena = arena
            self.arena.restart()
        self.ends: list[int] = []  # the arena's bytes in use up to the end of each slot
        for _ in range(calls):
            pairs = [export(x, xdir, dev, self.arena) for x in inputs]
            outs = [export_tensor(poisoned_like(t), out_dir or xdir, dev, self.arena)
                    for t in outputs]
            self.inputs.append([p[0] for p in pairs])
            self.outputs.append([o[0] for o in outs])
            self.descs.append({"inputs": [p[1] for p in pairs], "outputs": [o[1] for o in outs]})
            self.files += [d[1]["path"] for d in pairs + outs if d[1]["kind"] == "file"]
            self.ends.append(self.arena.used if self.arena is not None else 0)
        self.stage: Staging | None = None  # the referee's one staging area, laid out as here
        self.host_sets: list[list[Any]] | None = None  # host: the window's sets, one file each

    def fill(self, slot: int, values: list[Any]) -> list[Any]:
        """The set's values into the slot, its outputs poisoned; the non-tensor values (the
        runner takes those from the request)."""
        return write_slot(self.inputs[slot], self.outputs[slot], values, copy_by_kernel)

    def fill_staged(self, count: int) -> None:
        """The first ``count`` slots, staged already (``Staging``), into the arena at once."""
        if count and self.stage is not None and self.arena is not None:
            end = self.ends[count - 1]
            copy_by_kernel(self.arena.bytes[:end], self.stage.bytes[:end])

    def fill_staged_slot(self, slot: int) -> None:
        """Slot ``slot`` alone, staged already, into the arena: a window's sets are
        released one call at a time."""
        if self.stage is not None and self.arena is not None and 0 <= slot < len(self.ends):
            start, end = self.ends[slot - 1] if slot else 0, self.ends[slot]
            copy_by_kernel(self.arena.bytes[start:end], self.stage.bytes[start:end])

    def stage_host(self, slot: int, values: list[Any]) -> tuple[int, list[Any]]:
        """A set for slot ``slot`` in a file of its own (``host_set``), the slot's outputs
        poisoned: its descriptor, and the set's non-tensor values."""
        fd, views = host_set(values)
        assert self.host_sets is not None
        self.host_sets.append(views)
        for out in self.outputs[slot]:
            out.fill_(poison_value(out.dtype))
        return fd, [None if isinstance(v, torch.Tensor) else v for v in values]

    def drop_host_sets(self) -> None:
        self.host_sets = None

    def window_inputs(self, slot: int) -> list[Any]:
        """The inputs call ``slot`` of the last window or trial was given, as they are now."""
        return self.host_sets[slot] if self.host_sets is not None else self.inputs[slot]

    def remove(self) -> None:
        """The exchange files go (device memory stays: ``Referee.close``)."""
        self.drop_host_sets()
        for name in self.files:
            Path(name).unlink(missing_ok=True)


def write_slot(inputs: list[Any], outputs: list[torch.Tensor], values: list[Any],
               copy: Callable[[torch.Tensor, torch.Tensor], object]) -> list[Any]:
    """A set's tensors into a slot's input buffers (by ``copy``) and its outputs poisoned;
    returns the non-tensor values (the runner takes those from the request)."""
    plain: list[Any] = []
    for buf, value in zip(inputs, values, strict=True):
        if isinstance(buf, torch.Tensor) and isinstance(value, torch.Tensor):
            copy(buf, value)
            plain.append(None)
        else:
            plain.append(value)
    for out in outputs:
        out.fill_(poison_value(out.dtype))
    return plain


def copy_by_kernel(dst: torch.Tensor, src: torch.Tensor) -> None:
    """``dst`` ← ``src`` bit for bit. On a GPU by an elementwise kernel, never by the copy
    engines (where torch's ``copy_`` of two dense tensors of one layout goes): a copy engine
    runs beside another process's kernels, a kernel takes turns with them, so a runner's work
    started by a fill slows the fill, which the window then counts (``conduct``)."""
    if dst.device.type != "cuda" or not copy_words(dst, src):
        dst.copy_(src)  # on a GPU only where layouts differ: then torch copies by a kernel


def copy_words(dst: torch.Tensor, src: torch.Tensor) -> bool:
    """``dst`` ← ``src`` as integer words by an elementwise kernel, where both are dense runs
    of one dtype and layout; False (nothing done) otherwise."""
    if dst.numel() == 0 or dst.dtype != src.dtype or dst.stride() != src.stride() or \
            dst.shape != src.shape or src.is_conj() or src.is_neg() or dst.is_conj() or \
            dst.is_neg():
        return False  # a conjugate or negative view's bits are not its values
    a, b = _words(dst), _words(src)
    if a is None or b is None or a.dtype != b.dtype:
        return False
    torch.bitwise_or(b, 0, out=a)
    return True


def _words(t: torch.Tensor) -> torch.Tensor | None:
    """A dense tensor's memory as one run of the widest integers it divides into (None when
    its elements do not lie in one dense run)."""
    dims = sorted((st, n) for st, n in zip(t.stride(), t.shape, strict=True) if n > 1)
    expected = 1
    for stride, size in dims:
        if stride != expected:
            return None
        expected *= size
    try:
        run = torch.as_strided(t, (t.numel(),), (1,)).view(torch.uint8)
    except RuntimeError:
        return None
    for dtype in (torch.int64, torch.int32, torch.int16):
        if run.numel() % dtype.itemsize == 0 and run.data_ptr() % dtype.itemsize == 0:
            with contextlib.suppress(RuntimeError):
                return run.view(dtype)
    return run


class Staging:
    """A GPU pool's slots laid out as in its arena, in the referee's own memory (no runner can
    map it): a window's sets and poisoned outputs are written here before the clock, and the
    fill on the clock is one kernel's copy of the whole span (``Pool.fill_staged``), whose
    time hangs on no launch per buffer."""

    def __init__(self, pool: Pool, area: torch.Tensor) -> None:
        """``area``: the referee's staging bytes (one area for every pool: a window stages
        and fills one runner's at a time; one per pool held a copy of every runner's slots,
        retired ones included, and ran a referee out of memory on an H200, 2026-11-30)."""
        assert pool.arena is not None
        base = pool.arena.ptr
        self.bytes = area[:pool.arena.used]

        def mirror(t: torch.Tensor) -> torch.Tensor:
            start = t.data_ptr() - base
            nbytes = t.numel() * t.element_size()
            return self.bytes[start:start + nbytes].view(t.dtype).view(t.shape)
        self.inputs = [[mirror(t) if isinstance(t, torch.Tensor) else t for t in slot]
                       for slot in pool.inputs]
        self.outputs = [[mirror(t) for t in slot] for slot in pool.outputs]
        self.sets: list[int] = []  # staged, in slot order
        self.plain: list[list[Any]] = []  # their non-tensor values, as ``put`` gave them

    def clear(self) -> None:
        """Zeros over the span: the fill copies the padding between buffers too, which may
        hold another pool's staged sets or the referee's leftovers."""
        self.bytes.zero_()
        self.sets, self.plain = [], []

    def put(self, slot: int, values: list[Any]) -> list[Any]:
        """The set's values into the slot's staged buffers, its outputs poisoned; the
        non-tensor values (the runner takes those from the request)."""
        return write_slot(self.inputs[slot], self.outputs[slot], values, torch.Tensor.copy_)


class InputSet:
    def __init__(self, original: list[Any]) -> None:
        self.original = original
        self.expected: Any = None  # the strict fp32 reference output


def with_sampled(expected: torch.Tensor, buf: torch.Tensor, elements: Any,
                 data: Any) -> torch.Tensor | None:
    """``expected`` with the sampled elements of its output buffer ``buf`` (contiguous: the
    element at byte ``k * itemsize`` is the ``k``th in row-major order) put in their places;
    None where the sample is empty or does not fit the buffer."""
    if expected.dtype != buf.dtype or expected.shape != buf.shape or not isinstance(data, str) \
            or not isinstance(elements, list) or not elements or \
            not all(is_index(k, buf.numel()) for k in elements):
        return None
    try:
        raw = bytes.fromhex(data)
    except ValueError:
        return None
    if len(raw) != len(elements) * buf.element_size():
        return None
    got = expected.detach().clone(memory_format=torch.contiguous_format)
    got.view(-1)[torch.tensor(elements)] = torch.frombuffer(bytearray(raw), dtype=buf.dtype)
    return got


def _drawn(sampled: Any, calls: int) -> dict[int, Any]:
    """The calls the parent drew for the seal, with the runner's word on each (only calls
    of this window; anything else is dropped)."""
    drawn: dict[int, Any] = {}
    for item in sampled if isinstance(sampled, list) else []:
        if isinstance(item, list) and len(item) == 2 and is_index(item[0], calls):
            drawn[item[0]] = item[1]
    return drawn


def _nbytes(values: list[Any]) -> int:
    return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))


class Referee:
    def __init__(self, job: Job) -> None:
        self.job = job
        self.sets: dict[int, InputSet] = {}
        self.pools: dict[int, Pool] = {}
        self.retired: list[Pool] = []  # pools whose arena a runner outgrew (kept)
        self.stage_area: torch.Tensor | None = None  # every pool's ``Staging`` lies here
        self.filled: dict[int, list[int]] = {}  # runner -> the set in each slot
        self.windows: dict[int, WindowSeal] = {}  # runner -> its last window, as sealed
        self.open: dict[int, WindowSeal] = {}  # runner -> its window being released, unsealed
        self.gen = torch.Generator().manual_seed(int.from_bytes(os.urandom(8), "little"))
        self.peer: Peer | None = None  # the parent's socket (``run``)

    # -- ops -----------------------------------------------------------------------------
    def init(self, msg: RefereeInit) -> RefereeInfo:
        self.h = Harness(self.job, init_seed=int(msg["init_seed"]))
        if self.peer is not None and self.h.device.type == "cuda":
            self.peer.spin_s = WINDOW_POLL_S  # a GPU window's steps come one a call
        self.placer = Placer(self.h.device)
        self._own = torch.zeros(1 << 16, device=self.h.device)  # an empty window's seal reads it
        self.model = self.h.reference_model()
        self.probe = self.h.make_inputs(int(msg["probe_seed"]))
        with torch.no_grad():
            out = self.model(*clone_inputs(self.probe))
        tensors = as_tensors(out)
        if tensors is None:
            raise SetupError("the reference returns neither a tensor nor a tuple of tensors")
        self.single = isinstance(out, torch.Tensor)
        self.templates = [t.detach() for t in tensors]
        self.floor = self._baseline_floor(out)
        tolerance = describe_tolerance(self.job.tolerance)
        tolerance["baseline_settings"] = self.h.baseline_settings
        if self.floor:
            tolerance["baseline_floor"] = self.floor
        return {"device": envinfo.device_info(self.h.device), "versions": envinfo.versions(),
                "tolerance": tolerance,
                "outputs": [{"shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch.")}
                            for t in self.templates],
                "set_bytes": _nbytes(self.probe) + _nbytes(self.templates),
                "free_bytes": envinfo.free_memory(self.h.device)}

    def _baseline_floor(self, strict_out: Any) -> float:
        """The timed baseline (PyTorch's defaults: cuDNN convolutions in TF32) is itself this
        far from strict fp32: twice that is the tolerance at least, so the reference's own
        code at the baseline passes. 0 when the baseline is strict fp32 or matches it."""
        if self.job.baseline == "strict" or self.h.device.type != "cuda":
            return 0.0
        baseline_settings(self.job.baseline)
        try:
            with torch.no_grad():
                out = self.model(*clone_inputs(self.probe))
        finally:
            strict_fp32()
        return 2.0 * needed_tolerance(strict_out, out)

    def pool(self, msg: PoolRequest) -> PoolSlots | WithFds:
        """A runner's buffers (made again at another size), described for it to open once; on
        CUDA the reply carries its arena's file descriptor (the parent relays it to that
        runner alone, with ``attach``)."""
        runner = int(msg["runner"])
        old = self.pools.get(runner)
        out_dir = msg.get("out_dir")  # host outputs kept where no runner can map them
        made = Pool(self.probe, self.templates, int(msg["calls"]), Path(str(msg["xdir"])),
                    self.h.device, Path(out_dir) if out_dir else None,
                    old.arena if old is not None else None)  # the old pool stays if this fails
        if old is not None:
            old.remove()
        if old is not None and old.arena is not made.arena:
            # An arena outgrown is kept until the end (the runner is untrusted and need not
            # unmap it; nothing of the referee's may ever take its place), and one that still
            # fits is used again (the same allocation and descriptor, no new memory), so a
            # runner's arenas grow only with the largest pool it was given.
            self.retired.append(old)
        if old is not None:
            old.stage = None  # its views of the staging area go with it
        self.pools[runner] = made
        self._lay_out_staging()
        # The arena has no legacy IPC handle (VMM memory), so no handle a runner names as
        # where its outputs lie opens it: the Placer needs no mark for our own memory.
        self.h.clock.sync()
        if made.arena is None:
            return {"slots": made.descs}
        return WithFds({"slots": made.descs}, [made.arena.fd])  # lent: the arena keeps it

    def _lay_out_staging(self) -> None:
        """Every live GPU pool's ``Staging`` over one area of the referee's, as large as the
        largest of them (made again, larger, when a pool outgrows it)."""
        live = [p for p in self.pools.values() if p.arena is not None]
        if not live:
            return
        need = max(p.arena.used for p in live if p.arena is not None)
        if self.stage_area is None or self.stage_area.numel() < need:
            for p in live:
                p.stage = None  # no view keeps the old area alive
            self.stage_area = None
            self.stage_area = torch.zeros(need, dtype=torch.uint8, device=self.h.device)
        for p in live:
            p.stage = Staging(p, self.stage_area)

    def prepare(self, msg: Prepare) -> Empty:
        for spec in msg["sets"]:
            self.sets[int(spec["id"])] = InputSet(self.h.make_inputs(int(spec["seed"])))
        self.h.clock.sync()
        return {}

    def stage(self, msg: Fill) -> Filled | WithFds:
        """A runner's next sets written where no runner can map them, before the window's
        clock starts. GPU: in its slots' layout (``Staging``), which ``fill`` and ``step``
        copy. Host: each set in a file of its own, whose descriptors go to the parent, which
        hands each to the runner with its call (``first``: the slot of the first of these
        sets; a window's sets may come in several requests)."""
        runner, pool = int(msg["runner"]), self.pools[int(msg["runner"])]
        ids = [int(i) for i in msg["sets"]]
        if pool.arena is None:
            return self._stage_host(runner, pool, ids, int(msg.get("first") or 0))
        if pool.stage is None:
            return {"values": []}
        for other in self.pools.values():  # the area is shared: staged for one pool only
            if other.stage is not None:
                other.stage.sets, other.stage.plain = [], []
        pool.stage.clear()
        plain = [pool.stage.put(j, self.sets[sid].original) for j, sid in enumerate(ids)]
        pool.stage.sets, pool.stage.plain = ids, plain
        self.h.clock.sync()
        return {"values": plain}

    def _stage_host(self, runner: int, pool: Pool, ids: list[int], first: int) -> WithFds:
        if first == 0:
            pool.drop_host_sets()
            pool.host_sets = []
            self.filled[runner] = []
            self.open[runner] = WindowSeal(runner, self.filled[runner], pool.outputs, [], {})
        if pool.host_sets is None or first != len(pool.host_sets):
            raise ValueError(f"sets staged for slots {first}.. out of order")
        if first + len(ids) > len(pool.outputs):
            raise ValueError(f"{first + len(ids)} sets staged for a pool of "
                             f"{len(pool.outputs)} slots")
        made = [pool.stage_host(first + j, self.sets[sid].original) for j, sid in enumerate(ids)]
        self.filled[runner] += ids
        return WithFds({"values": [plain for _, plain in made]}, [fd for fd, _ in made],
                       given=True)  # the referee keeps its mappings, not the descriptors

    def fill(self, msg: Fill) -> Filled:
        """Sets into a runner's slots, in order (a set may fill several slots). Staged ones
        (a GPU window's): the first slot only, unless ``all``; the rest is released call by
        call (``step``). Else slot by slot, all of them (a trial's)."""
        runner, pool = int(msg["runner"]), self.pools[int(msg["runner"])]
        ids = [int(i) for i in msg["sets"]]
        pool.drop_host_sets()
        if pool.stage is not None and pool.stage.sets == ids:
            if msg.get("all"):
                pool.fill_staged(len(ids))
            else:
                pool.fill_staged_slot(0)
            plain = pool.stage.plain
        else:
            plain = [pool.fill(j, self.sets[sid].original) for j, sid in enumerate(ids)]
        self.filled[runner] = ids
        self.open[runner] = WindowSeal(runner, ids, pool.outputs, [], {})
        if msg.get("flush"):
            self.h.clock.flush()
        self.h.clock.sync()
        return {"values": plain}

    def step(self, msg: Step) -> Empty:
        """Between two calls of a GPU window, on its clock: the output of the call just
        done read at places drawn now (it must be whole when the runner says it is: a later
        difference fails the window, ``late``), then the next call's set released into its
        slot (before now it held an older set, so the call could not start early)."""
        runner = int(msg["runner"])
        pool, window = self.pools[runner], self.open.get(runner)
        if window is None:
            raise ValueError("a step outside a window")
        done = msg.get("done")
        if isinstance(done, int) and is_index(done, len(window.ids)):
            new = msg.get("handles")  # those named since the last step, in order
            room = max(0, MAX_HANDLES - len(window.segments))
            window.segments += self.placer.segments(runner, new[:room]
                                                    if isinstance(new, list) else None)
            window.where[done] = msg.get("where")
            window.probe(self.placer, [done], self.gen, done)
        if is_index(msg.get("release"), len(window.ids)):
            pool.fill_staged_slot(int(msg["release"]))
        self.h.clock.sync()
        return {}

    def expect(self, msg: SetIds) -> Empty:
        """The strict fp32 reference outputs of these sets, on clones of the originals."""
        with torch.no_grad():
            for sid in msg["sets"]:
                made = self.sets[int(sid)]
                if made.expected is None:
                    made.expected = self.model(*clone_inputs(made.original))
        self.h.clock.sync()
        return {}

    def idle(self, msg: object) -> IdleProbe:
        """How long a tiny kernel of ours takes to come back (median of 5, host clock): a
        GPU still running another process's kernels (work a runner left behind when it was
        stopped) makes us wait for a time slice."""
        if not hasattr(self, "_tiny"):
            self._tiny = torch.zeros(1, device=self.h.device)
        times = []
        for _ in range(5):
            started = time.perf_counter()
            self._tiny.add_(1)
            self.h.clock.sync()
            times.append((time.perf_counter() - started) * 1e3)
        return {"ms": statistics.median(times)}

    def flush(self, msg: object) -> Empty:
        """Evict the caches before a window, so every runner starts its window cold."""
        self.h.clock.flush()
        return {}

    def seal(self, msg: Seal) -> Sealed:
        """The end of a runner's timed window: read a sample of the outputs of the calls the
        parent drew after delivery (the last and two others), at places drawn now, mapping
        only the allocations those calls name. Every output is placed after the clock
        (``place``) and compared later, in place, with the runner stopped (``check``)."""
        runner = int(msg["runner"])
        pool = self.pools[runner]
        ids = self.filled.get(runner, [])
        mapper = self.placer.mapper
        opened = mapper.opened if mapper is not None else 0
        drawn = _drawn(msg.get("sampled"), len(ids))
        window = self.open.pop(runner, None)
        if window is None or window.ids != ids:
            window = WindowSeal(runner, ids, pool.outputs, [], {})
        window.segments = self.placer.segments(runner, msg.get("handles"))
        window.where.update(drawn)  # calls read at a step stay as they were placed then
        if ids:
            window.probe(self.placer, sorted(drawn), self.gen, len(ids) - 1)
        else:
            window.probe_nothing(self._own, self.gen)
        self.h.clock.sync()
        self.windows[runner] = window
        self.filled[runner] = []
        placed = [p for call in window.placed.values() for p in call]
        in_place = sum(p.key[0] == "ipc" for p in placed)
        return {"in_place": in_place, "copied": len(placed) - in_place,
                "map_error": mapper.last_error if mapper is not None else 0,
                "mapped": mapper.opened - opened if mapper is not None else 0}

    def place(self, msg: Place) -> Empty:
        """After the clock: the runner's word on every output of its last window (the same
        reply the seal had a part of), each allocation mapped and checked once."""
        window = self.windows.get(int(msg["runner"]))
        if window is not None:
            window.place_all(self.placer, msg.get("handles"), msg.get("where"))
        return {}

    def check(self, msg: Check) -> Checked:
        """Every output of a runner's last window for these sets, in place, against the
        strict reference, and the window's sampled bytes read again (the runner is stopped,
        the GPU idle)."""
        window = self.windows.get(int(msg["runner"]))
        if window is None:
            return {"results": []}
        wanted = {int(s) for s in msg["sets"]}
        calls = [(j, self.sets[sid]) for j, sid in enumerate(window.ids) if sid in wanted]
        if window.changed:
            return {"results": [self._changed() for _ in calls]}
        late_host = _calls(msg.get("late"))  # host: the parent's samples, per call
        reused = window.reused(self.placer) | _calls(msg.get("overwritten"))  # host: the parent's
        late = window.late(self.placer)  # bar bytes a later call's output lies over
        pool = self.pools[window.runner]
        for j, made in calls:
            if made.expected is None:
                raise RuntimeError(f"set {window.ids[j]} checked before its reference output")
        mutated = mutated_many([pool.window_inputs(j) for j, _ in calls],
                               [made.original for _, made in calls])
        judged = [j for j, _ in calls if j not in reused]  # a reused call has nothing to judge
        compared = dict(zip(judged, compare_many(
            [(self.sets[window.ids[j]].expected, self._got(window, j)) for j in judged],
            self.job.tolerance, self.floor), strict=True))
        return {"results": [self._result(compared.get(j), changed, late=late or j in late_host)
                            for (j, _), changed in zip(calls, mutated, strict=True)]}

    def sampled(self, msg: StepSamples) -> Agreed:
        """Host outputs: the calls of a runner's last window (sets not yet released) whose
        step samples, whole elements of each output read by the parent when the call said it
        was done, pass the check against the expected output at those elements. Judged as
        ``check`` judges (the same tolerance, scaled by the whole expected output): each
        output is the expected one with the sampled elements in their places."""
        window = self.windows.get(int(msg["runner"]))
        by_call: dict[int, dict[int, tuple[Any, Any]]] = {}
        for item in msg.get("samples") or []:
            if isinstance(item, list) and len(item) == 4 and type(item[0]) is int \
                    and type(item[1]) is int:
                by_call.setdefault(item[0], {})[item[1]] = (item[2], item[3])
        if window is None:
            return {"agreed": []}
        return {"agreed": sorted(j for j, outs in by_call.items()
                                 if self._sample_agrees(window, j, outs))}

    def _sample_agrees(self, window: WindowSeal, j: Any,
                       outs: dict[int, tuple[Any, Any]]) -> bool:
        """Whether call ``j``'s sample of every output passes (an output unsampled fails)."""
        if not is_index(j, len(window.ids)) or window.ids[j] not in self.sets:
            return False
        expected = self.sets[window.ids[j]].expected
        tensors = as_tensors(expected) if expected is not None else None
        if not tensors or set(outs) != set(range(len(tensors))):
            return False
        bufs = self.pools[window.runner].outputs[j]
        got = [with_sampled(e, buf, *outs[i])
               for i, (e, buf) in enumerate(zip(tensors, bufs, strict=False))]
        if len(got) != len(tensors) or any(g is None for g in got):
            return False
        return compare_outputs(expected, got[0] if self.single else got,
                               self.job.tolerance, self.floor).ok

    def _got(self, window: WindowSeal, j: int) -> Any:
        outputs = [p.tensor for p in window.call(self.placer, j)]
        return outputs[0] if self.single else outputs

    @staticmethod
    def _changed() -> CheckResult:
        return {"ok": False, "abs": 0.0, "rel": 0.0, "mutated": [], "reused": False,
                "late": False, "compared": False, "message": CHANGED_MESSAGE}

    @staticmethod
    def _result(result: Comparison | None, mutated: list[int], *, late: bool) -> CheckResult:
        """One call's check; ``result`` None: a later call's output lies in its memory, so
        it was never compared (``compared`` False: no verdict on its values)."""
        if result is None:
            return {"ok": not late, "abs": 0.0, "rel": 0.0, "mutated": mutated, "reused": True,
                    "late": late, "compared": False,
                    "message": LATE_MESSAGE if late else REUSED_MESSAGE}
        message = LATE_MESSAGE if late else result.message
        return {"ok": result.ok and not late, "abs": result.max_abs_err,
                "rel": result.max_rel_err, "message": message, "mutated": mutated,
                "reused": False, "late": late, "compared": True}

    def release(self, msg: SetIds) -> Empty:
        for sid in msg["sets"]:
            self.sets.pop(int(sid), None)
        self.placer.forget({k for w in self.windows.values() for k in w.memory()})
        return {}

    def close(self) -> None:
        self.windows.clear()
        self.sets.clear()
        self.placer.close()
        for pool in [*self.pools.values(), *self.retired]:
            pool.remove()
        # The arenas stay until this process exits: the runners may still be finishing.


def run(job: Job, peer: Peer) -> WorkerReport:
    report = WorkerReport(phase="serving")
    started = time.monotonic()
    referee = Referee(job)
    referee.peer = peer

    def on_error(exc: BaseException) -> str:
        text = str(exc) if isinstance(exc, SetupError) else describe_exception(exc)
        report.fail("setup" if isinstance(exc, SetupError) else "runtime", text)
        return text

    handlers: dict[str, Handler] = {
        "init": referee.init, "pool": referee.pool, "prepare": referee.prepare,
        "stage": referee.stage, "fill": referee.fill, "step": referee.step,
        "expect": referee.expect,
        "flush": referee.flush, "seal": referee.seal, "place": referee.place,
        "check": referee.check, "sampled": referee.sampled, "release": referee.release,
        "idle": referee.idle}
    try:
        serve(peer, handlers, on_error)
    finally:
        referee.close()
    report.phase = "done" if not report.error_kind else report.phase
    report.busy_s = round(time.monotonic() - started, 3)
    return report


def _calls(value: object) -> set[int]:
    """Call indices the parent found overwritten by a later call (host outputs it read)."""
    return {j for j in value if type(j) is int} if isinstance(value, list) else set()
