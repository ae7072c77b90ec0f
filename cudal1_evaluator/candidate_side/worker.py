"""The runner child: the small loop that lives in the candidate's process.

It builds the module (setup, then import and construct ModelNew with equal weights, then lock
down), opens the pool of shared buffers the referee made for it once (``attach``), and then
only calls the module on what the referee put in its slots and delivers the outputs: ``trial``
(two untimed calls for correctness) and ``burst`` (one trusted window: N calls on N fresh
input sets, each output copied into the referee's buffer; ``describe`` reports on them after
the referee sealed them). It times nothing and decides
nothing: the parent's clock times each window and the referee checks every output. What it
reports (output descriptions, settings changed, guard findings) can only lower a verdict.
The same loop runs the reference in a sibling process (``ModelNew = Model``), so both sides
pay the same hand-off. A "profile" child runs setup, build and lock down, then the profile.
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from cudal1_evaluator.candidate_side import (
    build_failures,
    checks,
    dtype_watch,
    integrity,
    stable_sources,
)
from cudal1_evaluator.candidate_side.build_child import build_dir_of
from cudal1_evaluator.candidate_side.dtype_watch import OBSERVED_KEY
from cudal1_evaluator.common.compare import as_tensors, describe_tolerance
from cudal1_evaluator.common.harness import Harness, SetupError, load_source
from cudal1_evaluator.schema import OUTPUT_REUSED_MESSAGE, Flag, Job
from cudal1_evaluator.trusted import envinfo
from cudal1_evaluator.wire.channel import WorkerChannel
from cudal1_evaluator.wire.cuda_ipc import Exporter
from cudal1_evaluator.wire.report import WorkerReport
from cudal1_evaluator.wire.talk import ARENA_FDS, SET_FDS, WINDOW_POLL_S, Handler, Peer, serve
from cudal1_evaluator.wire.talk_messages import (
    Attach,
    BurstRequest,
    Delivered,
    Empty,
    JudgedOutputs,
    OutputItem,
    OutputMeta,
    SettingsReply,
    SlotDesc,
    Trial,
    TrialOutputs,
    WorkerInit,
)
from cudal1_evaluator.wire.tensor_exchange import (
    copyable,
    deliver_into,
    open_host_set,
    populate,
)

BLOCKED = "blocked by the evaluator"
WATCHED_CALLS = (2, 3)  # correctness calls whose aten dtypes are watched


class _Stop(Exception):
    """A phase ended the run; the report already says why."""


class Worker:
    def __init__(self, job: Job, channel: WorkerChannel, report: WorkerReport) -> None:
        self.job, self.ch, self.rep = job, channel, report
        self.build_path = ""
        self.guard: integrity.Guard | None = None
        self.build_failures: build_failures.BuildFailures | None = None
        self.cand_calls = 0  # correctness calls so far
        self._seen: set[torch.dtype] = set()  # floating dtypes the watched calls computed in
        self._watched, self._reduced = dtype_watch.watched_then_reset, dtype_watch.reduced
        self.out_spec: list[Any] = []
        self.init_seed: int | None = None  # from the parent: the referee builds Model with it
        self.timing_checked = False
        self.pool: list[tuple[list[Any], list[Any]]] = []  # the referee's buffers, per slot
        self.peer: Peer | None = None  # the parent's socket (descriptors come with attach)
        self.away = False  # host outputs: the parent reads them here (no buffer to copy into)
        self.keep: list[Any] = []  # copies made for the parent to read, until the next request
        self.last_window: list[Any] = []  # host: the last described window's outputs, held
        # through the next window, so no new output can lie where they do (the parent checks),
        # and freed outside every window, on both sides (their frees are no one's work)
        self.held: list[Any] = []  # the last window's outputs, until ``describe``
        self.mapped: list[Any] = []  # host: the window's input sets, unmapped after it (an
        # unmap is work: on the clock on one side only if one side kept a view past its call)
        self.table: list[str] = []  # the allocations the window's outputs lie in, so far
        self.index: dict[bytes, int] = {}  # an allocation's handle -> its place in ``table``
        self.exporter = Exporter()

    def phase(self, name: str, step: Callable[[], None]) -> None:
        """Run one phase, recording its wall time (also when it stops the run)."""
        self.rep.phase = name
        started = time.monotonic()
        try:
            step()
        finally:
            self.rep.phases[name] = round(time.monotonic() - started, 4)

    # -- setup -------------------------------------------------------------------------
    def setup(self) -> None:
        try:
            self.h = Harness(self.job, init_seed=self.init_seed, baseline=self.job.baseline)
            self.rep.device = envinfo.device_info(self.h.device)
            self.rep.versions = envinfo.versions()
            self.reference = self.h.reference_model()
        except SetupError as exc:
            self.rep.fail("setup", str(exc))
            raise _Stop from None
        self.rep.tolerance = describe_tolerance(self.job.tolerance)
        self.rep.tolerance["baseline_settings"] = self.h.baseline_settings
        # every check used after the candidate import, bound before it
        self.fn = checks.capture()
        self._copy, self._memmove = torch.Tensor.copy_, ctypes.memmove
        self._empty = torch.empty
        self.bdir = build_dir_of(self.job, self.h.device)
        self.build_path = str(self.bdir.path)
        stable_sources.install(self.bdir.path)  # the build stage's paths: its build is reused
        self.build_failures = build_failures.install()  # builds its own code survives
        # writes only to this candidate's own build dir: never into another's cached build
        self.guard = integrity.install_guards([self.build_path, str(self.h.workdir)])
        # bound methods: patching the Guard class later does not reach these
        self._guard_lock, self._guard_findings = self.guard.lock_down, self.guard.findings
        self.globals0 = self.fn.snapshot_globals()
        self.settings0 = self.fn.snapshot_settings()

    # -- build -------------------------------------------------------------------------
    def build(self) -> None:
        self.ch.progress("build", 0, 1, "importing and compiling the candidate")
        bdir = self.bdir
        started = time.monotonic()
        try:
            self.cand_module = load_source("cudal1_candidate", self.job.candidate_source,
                                           self.h.workdir)
        except BaseException as exc:
            self._compile_failed(exc)
        cls = getattr(self.cand_module, "ModelNew", None)
        if not isinstance(cls, type):
            self.rep.fail("compile", "the candidate defines no class ModelNew")
            raise _Stop
        try:
            self.candidate = self.h.construct(cls)
            self.fn.load_matching_state(self.reference, self.candidate)
            self.candidate = self.candidate.to(self.h.device)
        except BaseException as exc:
            if self.fn.looks_like_build_error(str(exc)):
                self._compile_failed(exc)
            if _blocked(exc):
                raise
            self.rep.fail("runtime", f"ModelNew(...) failed: {self.fn.describe_exception(exc)}")
            raise _Stop from None
        self.rep.compile_time_s = round(time.monotonic() - started, 3)
        self.rep.build_cached = bdir.cached
        bdir.mark_complete()
        self.ch.progress("build", 1, 1, f"built in {self.rep.compile_time_s:.1f} s{bdir.note()}")

    def _compile_failed(self, exc: BaseException) -> None:
        if _blocked(exc):
            raise exc
        message = self.fn.describe_exception(exc, limit=200_000)
        if self.build_path:
            message = message.replace(self.build_path, "<build>")
        self.rep.compile_log = log = self.fn.trim_compile_log(message)
        self.rep.fail("compile", self.fn.headline(log) or type(exc).__name__)
        raise _Stop from None

    def lock_down(self) -> None:
        fn = self.fn
        self.rep.flags += fn.diff_globals(self.globals0, fn.snapshot_globals())
        self.rep.flags += fn.check_namespace(vars(self.h.problem), vars(self.cand_module))
        self.rep.flags += self.guard_findings()
        self.settings_cand = fn.snapshot_settings()
        self.rep.settings_changed = fn.diff_settings(self.settings0, self.settings_cand)
        fn.restore_settings(self.settings0)
        self._guard_lock()
        restore, s0, sc = fn.restore_call_settings, self.settings0, self.settings_cand
        # the reference always runs under the original settings, the candidate under its own
        self.prepare = {"reference": lambda: restore(s0), "candidate": lambda: restore(sc)}
        self.calls = {"reference": self.h.caller(self.reference),
                      "candidate": self.h.caller(self.candidate)}

    def guard_findings(self) -> list[Flag]:
        return self._guard_findings() if self.guard is not None else []

    def cand_call(self, args: list[Any]) -> Any:
        """One correctness call; the second and third are watched for the floating dtypes
        that reach aten ops (the first may autotune between methods)."""
        self.prepare["candidate"]()
        self.cand_calls += 1
        if self.cand_calls not in WATCHED_CALLS:
            return self.calls["candidate"](args)
        out = self._watched(lambda: self.calls["candidate"](args), self._seen)
        narrow = self._reduced(self._seen, [str(o.get("dtype")) for o in self.out_spec])
        if narrow:  # carried with the settings (the parent's precision parity reads it)
            self.rep.settings_changed[OBSERVED_KEY] = {"before": None, "after": list(narrow)}
        return out

    # -- serving the parent: trials and bursts on inputs the referee made -----------------
    def idle_after(self, handler: Handler) -> Handler:
        """``handler``, then a wait for the device: the parent checks that the GPU is idle
        after every untimed request of the candidate's (a window waits on its own)."""
        def handle(msg: Any) -> Any:
            reply = handler(msg)
            if hasattr(self, "h"):
                self.h.clock.sync()
            return reply
        return handle

    def serve_parent(self, msg: WorkerInit) -> SettingsReply:
        """The ``init`` request: setup, build and lock-down, then the settings the candidate
        changed (precision parity). Later requests are ``trial`` and ``burst``."""
        self.init_seed = int(msg["init_seed"])
        self.out_spec = msg.get("outputs") or []
        self.single = bool(msg.get("single", True))
        self.phase("setup", self.setup)
        self.phase("build", self.build)
        self.phase("lock_down", self.lock_down)
        self.like = self._expected_like()
        return {"settings_changed": self.rep.settings_changed}

    def _expected_like(self) -> Any:
        """Stand-ins with the reference output's shape, dtype and device, for check_outputs."""
        import torch

        from cudal1_evaluator.wire.tensor_exchange import dtype_of

        made = [torch.empty((), dtype=dtype_of(o["dtype"]), device=self.h.device)
                .expand([int(n) for n in o["shape"]]) for o in self.out_spec]
        return made[0] if self.single and len(made) == 1 else tuple(made)

    def _open(self, slot: SlotDesc, fds: list[int]) -> tuple[list[Any], list[Any]]:
        from cudal1_evaluator.wire.tensor_exchange import open_shared

        dev = self.h.device
        return ([open_shared(d, dev, fds) for d in slot["inputs"]],
                [open_shared(d, dev, fds) for d in slot["outputs"]])

    def _deliver(self, out: Any, buffers: list[Any], held: list[Any]) -> list[list[int] | None]:
        """Hold the output; say where each lies in host memory (the parent reads it), or copy
        it into the referee's buffers."""
        held.append(out)
        if self.away:  # a copy now, as the copy into a buffer was: a trial is untimed
            return self._host_places(out, buffers, True)
        items = list(out) if isinstance(out, tuple | list) else [out]
        if len(items) != len(buffers):
            return [None] * len(buffers)
        for buf, t in zip(buffers, items, strict=True):
            if copyable(t, buf):
                self._into(buf, t)
        return [None] * len(buffers)

    def _host_place(self, t: Any, buf: Any, copy: bool) -> list[int] | None:
        """Where a host output lies, [address, bytes], kept alive until the next request (a
        copy first when asked, or when its elements are not one contiguous block)."""
        if not copyable(t, buf):
            return None
        if copy or not t.is_contiguous():  # into fresh memory the way the referee's buffer
            made = self._empty(t.shape, dtype=t.dtype, device=t.device)  # was filled
            self._into(made, t)
            t = made
        self.keep.append(t)
        return [int(t.data_ptr()), int(t.numel() * t.element_size())]

    def _judge(self, held: list[Any]) -> list[OutputMeta]:
        """Describe the outputs of a sequence of calls, all held to its end (the first one
        checked in full). An output is ``reused`` when a later call freed it (CUDA graph
        trees, torch.compile's reduce-overhead, free a held output's memory at the next
        replay) or when its address is an earlier output's."""
        metas: list[OutputMeta] = []
        seen: set[int] = set()
        for i, out in enumerate(held):
            freed = _invalidated(out)
            if not freed and i == 0:
                self.rep.add_flags(self.fn.check_outputs(out, self.like))
            items = list(out) if isinstance(out, tuple | list) else [out]
            ptrs = set(_storage_ptrs(out))
            metas.append({"count": len(items), "items": [_describe_output(t) for t in items],
                          "reused": freed or bool(seen & ptrs)})
            seen |= ptrs
        return metas

    def _into(self, buf: torch.Tensor, t: torch.Tensor) -> None:
        deliver_into(buf, t, self._memmove, self._copy)

    def attach(self, msg: Attach) -> Empty:
        """Open the pool the referee exported for this runner, once (no input values in it
        yet: the referee fills the slots before each window). On CUDA its arena's descriptor
        came with the request: imported and mapped, then closed (``serve`` closes it too
        where opening failed)."""
        fds = self.peer.fds if self.peer is not None else []
        try:
            self.pool = [self._open(desc, fds) for desc in msg["slots"]]
        finally:
            if self.peer is not None:
                self.peer.drop_fds()
        self.away = any(d.get("kind") == "away" for slot in msg["slots"] for d in slot["outputs"])
        for inputs, _outputs in self.pool:
            for value in inputs:
                populate(value)
        return {}

    def _slots(self, values: list[list[Any]], first: int = 0, sets: Sequence[int] = ()
               ) -> list[tuple[list[Any], list[Any]]]:
        """Slots ``first``.. with the request's non-tensor values in their places. ``sets``:
        the calls' input sets, one descriptor each, handed over with the request (host
        windows); else the inputs are the slots' own."""
        if first < 0 or first + len(values) > len(self.pool):
            raise ValueError(f"calls {first}..{first + len(values) - 1} for a pool of "
                             f"{len(self.pool)} slots")
        if sets and len(sets) != len(values):
            raise ValueError(f"{len(values)} calls with {len(sets)} input sets")
        chosen = self.pool[first:first + len(values)]
        inputs = [open_host_set(fd, ins) for fd, (ins, _) in zip(sets, chosen, strict=True)] \
            if sets else [ins for ins, _ in chosen]
        return [([v if v is not None else t for t, v in zip(ins, plain, strict=True)], bufs)
                for ins, (_, bufs), plain in zip(inputs, chosen, values, strict=True)]

    def trial(self, msg: Trial) -> TrialOutputs:
        """Two calls on two copies of one fresh set (slots 0 and 1), memory poisoned before
        each."""
        fn, dev, sync = self.fn, self.h.device, self.h.clock.sync
        held: list[Any] = []
        at: list[list[list[int] | None]] = []
        self.keep = []
        first = self.cand_calls == 0  # its calls' times are reported (start-up diagnostics)
        with self.h.no_grad():
            for inputs, buffers in self._slots(msg["values"]):
                fn.poison(dev, self.like)
                started = time.monotonic()
                out = self.cand_call(inputs)
                sync()
                if first:
                    self.rep.phases[f"first trial, call {self.cand_calls}"] = round(
                        time.monotonic() - started, 4)
                at.append(self._deliver(out, buffers, held))
                del out
            sync()
        metas = self._judge(held)
        after = fn.diff_settings(self.settings0, fn.snapshot_settings())
        self.rep.settings_changed.update(after)
        reply: TrialOutputs = {"outputs": metas, "settings_changed": self.rep.settings_changed}
        if self.away:
            reply["at"] = at
        return reply

    def burst(self, msg: BurstRequest) -> Delivered:
        """Calls of one trusted window: the module on the sets of slots ``first``.., each
        output's place said (CUDA: in this process's own memory, read in place by the
        referee; host: read by the parent) or copied into the referee's buffer, then the
        device waited for. The parent releases a window's sets one call at a time (``more``:
        this request continues the window), so its clock runs from before the first request
        to the referee's seal; ``describe`` comes after."""
        entered = time.perf_counter()
        if not msg.get("more"):
            self._new_window()
        if self.peer is not None and self.h.clock.is_cuda:  # the next call comes at once
            self.peer.spin_s = WINDOW_POLL_S
        copy = bool(msg.get("copy"))  # every output into the referee's buffer (static outputs)
        account = bool(msg.get("account"))  # the loop's own account, for diagnostics only
        deep = account and msg.get("account") != "times"  # with allocations and GPU marks
        clock = time.perf_counter
        spent = {"call": 0.0, "hand_over": 0.0, "sync": 0.0, "before": clock() - entered}
        allocs = self._device_allocs() if deep else 0
        marks = self._gpu_marks(deep)
        call, held, told = self.calls["candidate"], self.held, len(self.table)
        at: list[list[list[int] | None]] = []
        where: list[list[list[int] | None]] = []
        sets = self.peer.fds if self.peer is not None else []
        try:
            slots = self._slots(msg["values"], int(msg.get("first") or 0), sets)
            if sets:
                self.mapped.append(slots)
        finally:
            if self.peer is not None:
                self.peer.drop_fds()
        t0 = t1 = 0.0
        if msg.get("noop"):  # the reference runner's hand-over alone (the parent's yardstick)
            slots = []
        with self.h.no_grad():
            for inputs, buffers in slots:
                if account:
                    t0 = clock()
                out = call(inputs)
                if account:
                    t1 = clock()
                    marks.mark()
                if self.away:
                    held.append(out)
                    at.append(self._host_places(out, buffers, copy))
                else:
                    where.append(self._hand_over(out, buffers, held, copy))
                if account:
                    spent["call"] += t1 - t0
                    spent["hand_over"] += clock() - t1
            if not slots:  # an empty window or a no-op (the reference runner's): the launch
                self._touch()  # and device switch a window starts with, and no call
            t0 = clock() if account else 0.0
            self.h.clock.sync()
            spent["sync"] = clock() - t0 if account else 0.0
        reply: Delivered = {"handles": self.table[told:], "where": where}
        if self.away:
            reply["at"] = at
        if account:  # nothing reads it as a time (``benchmarks/window_diag.py`` prints it)
            reply["loop_ms"] = {k: round(v * 1e3, 4) for k, v in spent.items()}
            if deep:
                reply["loop_ms"]["device_allocs"] = self._device_allocs() - allocs
                reply["loop_ms"].update(marks.summary())
        return reply

    def _new_window(self) -> None:
        """A window's first request: the last checks before timing (once), and the last
        window's outputs let go (host: held until ``describe``)."""
        if not self.timing_checked:  # the globals and the guard once more before timing
            self.timing_checked = True
            self.rep.add_flags(self.fn.diff_globals(self.globals0, self.fn.snapshot_globals()))
            self.rep.add_flags(self.guard_findings())
        if self.away:  # nothing is freed inside a window: what is held goes at ``describe``
            self.last_window += [*self.held, *self.keep, *self.mapped]
        self.held, self.keep, self.mapped = [], [], []
        self.table, self.index = [], {}  # the allocations named so far in this window
        self.prepare["candidate"]()

    def _gpu_marks(self, account: bool) -> GpuMarks:
        return GpuMarks(account and self.h.clock.is_cuda)

    def _device_allocs(self) -> int:
        """The caching allocator's driver allocations so far (a diagnostic)."""
        if not self.h.clock.is_cuda:
            return 0
        return int(torch.cuda.memory_stats(self.h.device).get("num_device_alloc", 0))

    def _touch(self) -> None:
        if self.h.clock.is_cuda:
            if not hasattr(self, "_one"):
                self._one = torch.zeros(1, device=self.h.device)
            self._one.add_(1)

    def _host_places(self, out: Any, buffers: list[Any], copy: bool) -> list[list[int] | None]:
        """One call's host outputs: where each lies (``copy``: a copy of it, made now)."""
        items = list(out) if isinstance(out, tuple | list) else [out]
        if len(items) != len(buffers):
            return [None] * len(buffers)
        return [self._host_place(t, buf, copy) for buf, t in zip(buffers, items, strict=True)]

    def _hand_over(self, out: Any, buffers: list[Any], held: list[Any], copy: bool
                   ) -> list[list[int] | None]:
        """Hold one call's output; per output, where it lies (read in place), else None after
        copying it into the referee's buffer."""
        held.append(out)
        items = list(out) if isinstance(out, tuple | list) else [out]
        if len(items) != len(buffers):
            return [None] * len(buffers)
        where: list[list[int] | None] = []
        for buf, t in zip(buffers, items, strict=True):
            found = self.exporter.locate(t, self.table, self.index) \
                if copyable(t, buf) and not copy \
                else None
            if found is None and copyable(t, buf):
                self._into(buf, t)
            where.append(found)
        return where

    def describe(self, msg: object) -> JudgedOutputs:
        """The last window's outputs described (after the referee sealed them), then let go."""
        held = self.held
        if self.away:
            self._hold_over()
        self.held, self.mapped = [], []  # its input sets too, here, outside every window
        with self.h.no_grad():
            return {"outputs": self._judge(held)}

    def let_go(self, msg: object) -> Empty:
        """Host outputs, after a window the parent has read (the reference's, which no
        ``describe`` follows in the alone phase): as ``describe`` does, outside any window."""
        self._hold_over()
        return {}

    def _hold_over(self) -> None:
        """The window just read is held through the next one, and the one before it freed:
        the same on both sides, so neither frees or reuses memory the other does not."""
        if self.held or self.keep:
            self.last_window = [*self.held, *self.keep]
            self.held, self.keep = [], []
        self.mapped = []  # the window's input sets, unmapped here, outside it, on both sides

    # -- profile -----------------------------------------------------------------------
    def profile(self) -> None:
        if not (self.h.clock.is_cuda and self.job.profile):
            return
        self.ch.progress("profile", 0, 1, "")
        inputs = self.h.make_inputs()
        sync = self.h.clock.sync
        self.prepare["reference"]()
        ref = self.fn.kernels_of(self.calls["reference"], inputs, sync)
        self.prepare["candidate"]()
        cand = self.fn.kernels_of(self.calls["candidate"], inputs, sync)
        handled = self.fn.handled_exceptions(self.calls["candidate"], inputs,
                                             getattr(self.cand_module, "__file__", "") or "")
        self.rep.profile, flags = self.fn.profile_summary(ref, cand, self.job.candidate_source,
                                                          handled)
        self.rep.flags += flags

    # -- wrap-up (every path) ------------------------------------------------------------
    def failed(self, exc: BaseException) -> None:
        """The candidate raised: a refusal by the guard is a verdict, a build failure that
        nothing handled (a lazy ``load_inline`` in ``forward``) a compile error, anything else
        a crash."""
        if _blocked(exc):
            reasons = [f"{f.code}: {f.reason}" for f in self.guard_findings()
                       if f.severity == "reject"]
            self.rep.fail("blocked", "; ".join(dict.fromkeys(reasons)) or _describe(exc))
        elif hasattr(self, "fn") and self.fn.looks_like_build_error(str(exc)):
            self.rep.compile_log = self.fn.trim_compile_log(_describe(exc))
            self.rep.fail("compile", f"a build in a call failed and nothing handled it: "
                          f"{self.fn.headline(self.rep.compile_log) or type(exc).__name__}")
        else:
            self.rep.fail("runtime", _describe(exc))

    def wrap_up(self) -> None:
        """Settings back, and the guard's findings into the report, whatever happened."""
        if self.guard is None:
            return
        try:
            self.fn.restore_settings(self.settings0)
            self.rep.flags += self._guard_findings()
            self._note_failed_builds()
        except BaseException as exc:
            self.rep.fail("runtime", _describe(exc))

    def _note_failed_builds(self) -> None:
        """Builds that failed while the candidate went on: a warning beside a verdict that
        follows what ran (not when the failure itself ended the run: a compile error)."""
        flag = self.build_failures.flag() if self.build_failures is not None else None
        if flag is not None and self.rep.error_kind != "compile":
            self.rep.add_flags([flag])


class GpuMarks:
    """CUDA events before a window's first call and after each call (a diagnostic of the
    ``account`` mode only: nothing reads it as a time). ``summary`` gives the device's own
    time for the calls, their span and the slowest call, to split a window's wall time into
    the kernels' time and what lies around them."""

    def __init__(self, on: bool) -> None:
        self.on = on
        self.events: list[Any] = []
        self.mark()

    def mark(self) -> None:
        if self.on:
            event = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
            event.record()
            self.events.append(event)

    def summary(self) -> dict[str, float]:
        if len(self.events) < 2:
            return {}
        calls = [a.elapsed_time(b) for a, b in zip(self.events, self.events[1:], strict=False)]
        return {"gpu_span": round(sum(calls), 4), "gpu_first": round(calls[0], 4),
                "gpu_max": round(max(calls), 4), "gpu_min": round(min(calls), 4)}


CUDA_GRAPH_OVERWRITTEN = "CUDAGraphs that has been overwritten"


def _describe(exc: BaseException) -> str:
    from cudal1_evaluator.common.harness import (
        describe_exception,  # bound copy unavailable before setup
    )

    text = describe_exception(exc)
    return f"{OUTPUT_REUSED_MESSAGE}\n({text})" if CUDA_GRAPH_OVERWRITTEN in text else text


def _describe_output(t: object) -> OutputItem:
    if not isinstance(t, torch.Tensor):
        return {"type": type(t).__qualname__}
    return {"type": "Tensor" if type(t) is torch.Tensor else type(t).__qualname__,
            "shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch."),
            "device": str(t.device), "strides": list(t.stride()) if t.layout == torch.strided
            else []}


def _storage_ptrs(out: Any) -> list[int]:
    ptrs = []
    for t in as_tensors(out) or []:
        try:
            if t.numel():
                ptrs.append(int(t.untyped_storage().data_ptr()))
        except (RuntimeError, NotImplementedError):
            continue
    return ptrs


def _invalidated(out: Any) -> bool:
    """Whether an output can no longer be read: its storage was freed (reading it raises, as
    CUDA graph trees make it) or shrunk under the tensor."""
    for t in as_tensors(out) or []:
        try:
            if not t.numel():
                continue
            storage = t.untyped_storage()
            last = t.storage_offset() + sum((n - 1) * s for n, s in zip(t.shape, t.stride(),
                                                                         strict=True))
            if storage.nbytes() < (last + 1) * t.element_size():
                return True
            storage.data_ptr()
        except NotImplementedError:  # a layout without one storage (sparse): not ours to judge
            continue
        except RuntimeError:
            return True
    return False


def _blocked(exc: BaseException | None) -> bool:
    """The guard's PermissionError, raised here or anywhere in the exception's chain."""
    seen = 0
    while exc is not None and seen < 20:
        if isinstance(exc, PermissionError) and BLOCKED in str(exc):
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


def run(job: Job, channel: WorkerChannel, *, peer: Peer | None = None,
        profile_only: bool = False) -> WorkerReport:
    """Serve the parent's requests (init, trials, bursts) until it says finish; then, on CUDA,
    the profile. Without ``peer`` (a profile child) only setup, build and the profile."""
    report = WorkerReport()
    started = time.monotonic()
    worker = Worker(job, channel, report)
    worker.peer = peer

    def on_error(exc: BaseException) -> str:
        if not isinstance(exc, _Stop):
            worker.failed(exc)
        return report.error or type(exc).__name__

    try:
        if peer is None or profile_only:
            worker.phase("setup", worker.setup)
            worker.phase("build", worker.build)
            worker.phase("lock_down", worker.lock_down)
        else:
            handlers: dict[str, Handler] = {
                "init": worker.idle_after(worker.serve_parent),
                "attach": worker.idle_after(worker.attach),
                "trial": worker.idle_after(worker.trial), "burst": worker.burst,
                "describe": worker.idle_after(worker.describe),
                "let_go": worker.idle_after(worker.let_go)}
            serve(peer, handlers, on_error, fd_ops={"attach": ARENA_FDS, "burst": SET_FDS})
        if not report.error_kind and worker.guard is not None:
            with worker.h.no_grad():
                worker.phase("profile", worker.profile)
            report.phase = "done"
    except _Stop:
        pass
    except BaseException as exc:  # anything the candidate throws ends as a report
        worker.failed(exc)
    worker.wrap_up()
    report.add_flags([])  # one of each finding
    report.busy_s = round(time.monotonic() - started, 3)
    return report
