"""The parent's side of one evaluation (torch-free): a referee, runners, one schedule, one clock.

Trusted: the parent (seeds from ``os.urandom``, the schedule, the clock ``perf_counter_ns``)
and the referee (inputs, the strict reference outputs, every check; it never loads candidate
code). Untrusted: the candidate's runner, treated as arbitrary native code that may speak the
protocol itself. Its replies never move a time or a pass: they can only add warnings.

A timed window (``_window``) opens when a runner is resumed with a request naming fresh input
sets it has never seen, and closes when the referee's seal returns, i.e. when the trusted side
holds the outputs; the wall time between is the sample. The reference runs through the same
window in a sibling runner (the same loop code, ``ModelNew = Model``), before the candidate is
imported (alone) and interleaved with it in random order, so both sides pay the same hand-off.
Every output of every timed call is checked by the referee.

Each child runs alone: runners are stopped (every process they started, through
``Child.signal_all``) outside their own requests, and the referee while a runner serves one.
"""

from __future__ import annotations

import contextlib
import math
import os
import random
import secrets
import signal
import statistics
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import cast

from cudal1_evaluator.isolation import lifetime, pidtree, sandbox
from cudal1_evaluator.isolation.pidtree import CpuReading, at_rest
from cudal1_evaluator.isolation.sandbox_layers import writable_for
from cudal1_evaluator.parent import gpu_watch, precision, release, warm, window_gate
from cudal1_evaluator.parent.output_reader import HostOutputs
from cudal1_evaluator.parent.timing_checks import (
    ONCE_SHARE,
    Burst,
    honest_fill_ms,
    means,
    median_of,
    once_cost,
    reading_pad_ms,
)
from cudal1_evaluator.schema import OUTPUT_REUSED_MESSAGE, Flag, Job, TrialReport
from cudal1_evaluator.stats import median_rel_ci
from cudal1_evaluator.verdict_details import PrecisionInfo, SettingsChanged
from cudal1_evaluator.wire.delivery import SAMPLED_CALLS, sampled_calls, seal_words
from cudal1_evaluator.wire.report import Recheck
from cudal1_evaluator.wire.talk import (
    ARENA_FDS,
    WINDOW_POLL_S,
    Peer,
    PeerGone,
    Reply,
    close_fds,
    read_metas,
)
from cudal1_evaluator.wire.talk_messages import (
    CheckResult,
    OutputMeta,
    Prepare,
    RefereeInfo,
    RefereeInit,
    SetRequest,
)

MIN_CALLS = 4  # calls per window at least
STEP_JUDGED_CALLS = 128  # calls' step samples a request carries (well under a line's limit)
NOOP_CALLS = MIN_CALLS  # requests with no call, each time the empty windows are timed (no
# pool holds fewer slots)
MAX_CALLS = 1024
MIN_BURSTS = 6  # windows per side before the loop may stop on a stable median
ALONE_BURSTS = 3  # the reference alone, before the candidate is imported
ALONE_MOST = 12  # windows of the reference alone at most, until the last ALONE_BURSTS agree
ALONE_SETTLED = 1.25  # the slowest of those within this of the fastest, a call
ALONE_ONCE_BURSTS = 6  # the same, where it also gives a window's once cost (``alone_intercept``)
SHORT_CALLS = SAMPLED_CALLS + 1  # the short windows of ``alone_intercept``: a full seal
WINDOW_TARGET_MS = 40.0  # work per window at least
WINDOW_MOST_MS = 1000.0  # the slowest side's window, at most, when a faster side wants more calls
HANDOFF_SHARE = 0.1  # the fixed hand-off of a window against its work, at most
WINDOW_BYTES = {"cuda": 1 << 30, "cpu": 128 << 20}  # a window's sets at least (cuda), at most
EMPTY_WINDOWS = 4  # the reference's empty windows at the start (the first one discarded)
HANDOFF_CAP = 1.05  # the timed rounds' hand-off, at most this times the alone phase's
IDLE_FLOOR_MS, IDLE_FACTOR = 0.5, 10.0  # a busy GPU: our tiny kernel this much slower
# the referee's pool of each runner
RUNNER = {"reference": 0, "candidate": 1, "matched": 2, "one_thread": 3}

REUSED_SEEN = ("the outputs of different calls lie in the same memory: each call returns a "
               "buffer the next call overwrites (a CUDA graph's static output?); code that keeps "
               "an output sees it change. Timed again with a copy of every output made before "
               "the next call (its cost is the candidate's), every call checked")
HELD_OVER = ("an output lies in memory that held an earlier window's output, which the "
             "runner was still holding: a buffer kept per input and returned again (code that "
             "keeps an output sees it change). Timed again with a copy of every output made "
             "before the next call (its cost is the candidate's)")
COPIES_NOT_MADE = ("timed with copies, outputs still share memory with another call's or lie "
                   "where an earlier window's held output lay: the copies asked for were not "
                   "made")
LATE_SEEN = ("outputs were still being written after the runner said its calls were done: work "
             "outside the timed window")

STOP_ESCAPED = ("the candidate's processes {why} while they were stopped (a SIGCONT of their "
                "own?): {when}")
OUTSIDE_CLOCK = ("work while a window's inputs were filled, or during the reference's window, "
                 "outside the clock")
BEHIND_READ = ("work while the parent read its outputs, hidden behind the copy that both sides "
               "pay")
ESCAPE_NS = 500_000  # CPU a stopped runner may show (a stop being delivered), at most
REST_POLL_S = 0.001  # a reading at rest polls its sweeps this often, off the clock
LOOK_POLL_S = 0.0001  # the look before a read polls its sweeps this often (it is on the clock)
STOP_WAIT_S = 1.0  # a stop takes effect within this, even on a loaded host
SETTLE_WAIT_S = 2.0  # on a loaded host, at most this for every task to leave the kernel too

Reuse = Callable[[RefereeInfo], "tuple[list[Burst], float] | None"]


@dataclass
class Evidence:
    """What the trusted side measured and decided."""

    info: RefereeInfo = field(default_factory=RefereeInfo)  # the referee's init reply
    trials: list[TrialReport] = field(default_factory=list)
    recheck: Recheck = field(default_factory=Recheck)
    flags: list[Flag] = field(default_factory=list)
    calls: int = MIN_CALLS  # calls per timed window
    alone: list[Burst] = field(default_factory=list)
    reference: list[Burst] = field(default_factory=list)
    matched: list[Burst] = field(default_factory=list)
    one_thread: list[Burst] = field(default_factory=list)  # the reference on one thread (host)
    candidate: list[Burst] = field(default_factory=list)
    settings_changed: SettingsChanged = field(default_factory=dict)
    handoff: list[float] = field(default_factory=list)  # empty windows of the reference, ms
    round_handoff: list[float] = field(default_factory=list)  # those of the kept rounds
    once_ms: float = 0.0  # what a window of calls pays once (``alone_intercept`` only)
    fills: dict[int, list[float]] = field(default_factory=dict)  # GPU: honest fills by sets
    steps: list[float] = field(default_factory=list)  # the reference's trusted steps, ms
    noop: list[float] = field(default_factory=list)  # its requests with no call, ms
    in_place: dict[str, int] = field(default_factory=dict)  # outputs read in place, last window
    side_calls: dict[str, int] = field(default_factory=dict)  # each side's, once sized together
    alone_sized: list[Burst] = field(default_factory=list)  # the reference alone at that size
    precision: PrecisionInfo = field(default_factory=PrecisionInfo)
    referee_error: str = ""
    referee_failed_after_candidate: bool = False  # the candidate's code had run on the host
    protocol_error: str = ""
    timed: bool = False

    def timed_sides(self) -> dict[str, list[Burst]]:
        """Each runner's kept windows of the timed rounds, by side (the lists themselves)."""
        return {"reference": self.reference, "candidate": self.candidate,
                "matched": self.matched, "one_thread": self.one_thread}

    def alone_for_cap(self) -> list[Burst]:
        """The reference alone that the cap on a slowed reference is held to: the alone phase
        (before the candidate was imported), or the alone windows at the timed size
        (``Conductor._alone_at_size``) where they read lower a call."""
        sized, alone = median_of(self.alone_sized), median_of(self.alone)
        if sized is not None and (alone is None or sized < alone):
            return self.alone_sized
        return self.alone


@dataclass
class Running:
    """A child being waited for on a thread, while the parent talks to it."""

    child: sandbox.Child
    peer: Peer
    outcome: sandbox.Outcome | None = None
    thread: threading.Thread | None = None
    xdir: Path | None = None  # where the referee puts this runner's copies of the inputs

    def alive(self) -> bool:
        return self.outcome is None and self.child.alive()


def _signal(running: Running, sig: signal.Signals) -> None:
    """SIGSTOP or SIGCONT to every process a child started (its namespace, else its group).
    Whatever the candidate's processes look like (a name that is not text, a pid gone), the
    parent goes on: a failure here is never an exception out of an evaluation."""
    with contextlib.suppress(Exception):
        running.child.signal_all(sig)


def _file_sizes(slots: object) -> dict[str, int]:
    """Each host file of a pool's description, with its size now (just made by the referee)."""
    sizes = {}
    for slot in slots if isinstance(slots, list) else []:
        for desc in [*slot.get("inputs", []), *slot.get("outputs", [])]:
            if desc.get("kind") == "file":
                sizes[str(desc["path"])] = _size(str(desc["path"]))
    return sizes


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return -1


def _seed() -> int:
    return int.from_bytes(os.urandom(8), "little") & ((1 << 63) - 1)


def calls_for(per_call_ms: float, handoff_ms: float, set_bytes: int, info: RefereeInfo,
              device: str) -> int:
    """Calls per window for a side whose call takes ``per_call_ms``: enough that the window
    holds ``WINDOW_TARGET_MS`` of work and its fixed hand-off (taken off, but noisy) is at most
    ``HANDOFF_SHARE`` of it, within the memory a window's fresh sets may take."""
    per_call = max(per_call_ms, 1e-3)
    wanted = max(WINDOW_TARGET_MS / per_call, handoff_ms / HANDOFF_SHARE / per_call)
    by_memory = window_bytes(device, int(info.get("free_bytes") or 0)) // max(1, set_bytes)
    return max(MIN_CALLS, min(MAX_CALLS, math.ceil(wanted), by_memory))


def sized_together(per_call_ms: dict[str, float], wanted: dict[str, int]) -> dict[str, int]:
    """Calls per window of every side at once (``Conductor._size_sides``): all the same, what
    the fastest side wants, unless the slowest side's window would then hold more than
    ``WINDOW_MOST_MS`` of work. A window pays a cost once that the empty windows do not
    measure; over the same number of calls it adds the same to both sides' time a call, which
    can only pull a speedup towards 1x, whichever side the host's noise made look slower
    when the sizes were chosen."""
    if not wanted:
        return {}
    slowest = max(per_call_ms.values())
    calls = min(max(wanted.values()),
                max(MIN_CALLS, math.floor(WINDOW_MOST_MS / max(slowest, 1e-3))))
    return dict.fromkeys(per_call_ms, calls)


def undersized(per_call_ms: dict[str, float], wanted: dict[str, int],
               sizes: dict[str, int]) -> dict[str, int] | None:
    """The sides' calls sized again from the timed rounds (``sized_together``), where a side's
    windows held under half the calls that gives (``Conductor._resized_from_timed``); else
    None."""
    sized = sized_together(per_call_ms, wanted)
    if all(calls <= 2 * sizes[side] for side, calls in sized.items()):
        return None
    return sized


def _agree(bursts: list[Burst], handoff_ms: float) -> bool:
    """Whether windows read alike a call (the slowest within ``ALONE_SETTLED`` of the fastest),
    with ``handoff_ms`` taken off each."""
    per_call = [replace(b, handoff_ms=handoff_ms).mean_ms() for b in bursts]
    return max(per_call) <= ALONE_SETTLED * min(per_call)


def window_bytes(device: str, free: int) -> int:
    """What one window's fresh sets may take, counted once: the referee keeps a side's sets
    and the candidate's reference outputs (1x), stages a window (1x, one area for all pools),
    each runner's arena holds a window's slots (2x, 3x with a matched reference; an outgrown
    one is kept: up to as much again) and each runner holds its outputs. A tenth of the free
    device memory, at least 1 GiB (a seventh, with a staging area per pool, ran a referee on
    an H200 out of memory at 129 GiB)."""
    if not device.startswith("cuda"):
        return WINDOW_BYTES["cpu"]
    return max(WINDOW_BYTES["cuda"], free // 10)


def _at_rest(running: Running, poll_s: float) -> CpuReading | None:
    """What a runner's processes have run, read once all are stopped and out of the kernel (a
    stop is delivered asynchronously, and a task stopped in the middle of a system call or a
    page fault still runs until it returns: on a loaded host that took long enough to read as
    work while stopped) and two readings in a row agree (a sweep reads a process's clock
    before its tasks' states, so a thread that stopped between the two was seen stopped
    without its last run); not stopped after ``STOP_WAIT_S``: ``stopped`` is False; still in
    the kernel after ``SETTLE_WAIT_S``: read as it is. None when it is gone or unreadable."""
    if not running.alive():
        return None
    previous: CpuReading | None = None
    reading: CpuReading | None = None
    started = time.monotonic()
    while True:
        with contextlib.suppress(Exception):  # a failed read is no second agreeing sweep
            previous, reading = reading, running.child.cpu_ns()
        waited = time.monotonic() - started
        if waited > SETTLE_WAIT_S or (reading is None and not running.alive()):
            break
        if reading is not None and (at_rest(previous, reading) or
                                    (not reading.stopped and waited > STOP_WAIT_S)):
            break
        time.sleep(poll_s)
    # the namespace's last PID once, after its tasks were seen stopped (not every poll: each
    # is a round trip to the init)
    return None if reading is None else replace(reading, last_pid=running.child.last_pid())


def _hold(ms: float) -> None:
    """Wait ``ms`` on the clock, closely: a sleep overshoots by 50-100 us, which twice a window
    would count against the candidate; the last stretch is a spin. Pads under 20 us are
    skipped (the overshoot would be the larger error)."""
    if ms < 0.02:
        return
    end = time.perf_counter() + ms / 1e3
    if ms > 0.3:
        time.sleep((ms - 0.2) / 1e3)
    while time.perf_counter() < end:
        pass


class Conductor:
    ACCOUNT_LOOP: bool | str = False  # runners time their own loops (``benchmarks/*_diag.py``)

    def __init__(self, job: Job, referee: Running, runners: dict[str, Running],
                 on_progress: sandbox.ProgressFn | None) -> None:
        self.job, self.ref = job, referee
        self.runners = dict(runners)  # "reference", "candidate", later "matched"
        self.ev = Evidence()
        self.on_progress = on_progress
        self._next_id = 0
        self._rng = random.Random(os.urandom(16))
        self._draw = random.SystemRandom()  # the calls a seal samples: nothing to infer
        self.alone_age: float | None = None  # set when the alone bursts are reused
        self.idle_ms: float | None = None  # the referee's tiny-kernel round trip, GPU idle
        self.init_seed = _seed()
        self._last: dict[str, Burst] = {}  # each runner's window of the last round
        self.copy_outputs = False  # the candidate copies every output (a static one was seen)
        self._readings: dict[str, list[float]] = {}  # the reference's readings at rest, ms
        self.shared = gpu_watch.SharedRounds(gpu_watch.GpuWatch(None, None), self._our_pids)
        self._kept_span: int | None = None  # the start of the last kept round, not yet settled
        self._round_shared = False  # the GPU was busy after a window, with another's work
        self._window_end_us = 0
        self.candidate_ran = False  # the candidate's code has been imported (``build``)
        self.alone_shared = False  # the alone windows were kept beside other work
        self._shared_sizes: dict[str, int] = {}  # the candidate's exchange files, as made
        self._quiet: CpuReading | None = None  # the candidate, stopped since its last request
        self.host = HostOutputs(job.device == "cpu", referee.child.exchange)
        # this evaluation's helper threads wait in its windows; on a host, warm children
        # still importing for the next evaluation are stopped in them too
        self.gate = window_gate.Gate() if job.device.startswith("cuda") else \
            window_gate.Gate(on_open=warm.hold_idle, on_close=warm.release_idle)
        for running in self.children():
            running.child.gate = self.gate

    @property
    def wrk(self) -> Running:
        return self.runners["candidate"]

    def children(self) -> list[Running]:
        return [self.ref, *self.runners.values()]

    def _our_pids(self) -> set[int]:
        """This evaluation's processes: the parent and everything in its children's
        namespaces (the candidate's included: its work is never someone else's)."""
        pids = {os.getpid()}
        for running in self.children():
            pids |= _pids_of(running)
        return pids

    # -- plumbing --------------------------------------------------------------------------
    def _progress(self, stage: str, done: int, total: int, note: str = "") -> None:
        if self.on_progress is not None:
            with contextlib.suppress(Exception):
                self.on_progress(stage, done, total, note)

    @contextlib.contextmanager
    def _alone(self, runner: Running, referee: bool = True) -> Iterator[None]:
        """Only ``runner`` runs while it serves a request: the other runners wait stopped
        outside their own requests, and the referee is stopped for its length (an idle
        child's spinning threads never take a core from the one being timed), unless it
        has steps to take in it (``referee`` False: a GPU window's). A runner's stop and go
        are its namespace init's (atomic, no scan of ``/proc``)."""
        if referee:
            _signal(self.ref, signal.SIGSTOP)
        _signal(runner, signal.SIGCONT)
        try:
            yield
        finally:
            _signal(runner, signal.SIGSTOP)
            if referee:
                _signal(self.ref, signal.SIGCONT)

    def _ask_referee(self, message: Mapping[str, object], max_fds: int = 0) -> Reply:
        """One request to the referee; its reply may carry at most ``max_fds`` descriptors
        (``self.ref.peer.take_fds()``: the caller's to close)."""
        try:
            return self.ref.peer.request(message, self.job.timeout_s, self.ref.alive,
                                         max_fds=max_fds)
        except PeerGone as exc:
            if not self.ev.referee_error:
                self.ev.referee_error = str(exc)
                self.ev.referee_failed_after_candidate = self.candidate_ran
            cut = self._shared_files_cut()
            if cut and not any(f.code == "shared_file_cut" for f in self.ev.flags):
                self.ev.flags.append(Flag("shared_file_cut", cut, "reject"))
            raise

    def _ask_runner(self, side: str, message: Mapping[str, object],
                    fds: Sequence[int] = ()) -> Reply:
        """One request to a runner, run alone, with ``fds`` (lent: still the caller's; a
        runner's reply never carries one: the talk socket refuses it whole). After any request
        of the candidate's but a window (whose check comes after the seal, ``_window``), the
        candidate is held to a fresh reading once stopped (``_quiet_since``), and the GPU
        must be idle: kernels it queued in an untimed request (a trial, ``describe``) would
        otherwise run beside the reference's next windows, or its alone windows measured
        again."""
        runner = self.runners[side]
        if side == "candidate":
            if message.get("op") != "burst":  # a window checked it right after the fill
                self._no_escape(self._quiet)  # nothing ran since its last request ended
            self._quiet = None  # it runs now: the next reading is the one to hold it to
        with self._alone(runner):
            reply = self._request(side, message, fds)
        if side == "candidate" and message.get("op") != "burst":
            self._quiet_since()  # outside any clock; the stop delivered before the probe
            if self.idle_ms is not None:  # a GPU: nothing to probe on a CPU
                self._window_end_us = gpu_watch.now_us()
                self._gpu_idle(f"its {message.get('op')} request")  # the referee's own failures
        return reply

    def _request(self, side: str, message: Mapping[str, object], fds: Sequence[int] = ()
                 ) -> Reply:
        """One request to a runner, as it runs now (``_ask_runner`` runs it alone)."""
        runner = self.runners[side]
        try:
            return runner.peer.request(message, self.job.timeout_s, runner.alive, fds=fds)
        except PeerGone as exc:
            if side == "candidate":
                self.ev.protocol_error = self.ev.protocol_error or str(exc)
            elif not self.ev.referee_error:
                self.ev.referee_error = f"the {side} runner failed: {exc}"
                self.ev.referee_failed_after_candidate = self.candidate_ran
            raise

    def _new_sets(self, count: int) -> list[int]:
        """``count`` fresh input sets from seeds drawn now, made and kept by the referee."""
        ids = list(range(self._next_id, self._next_id + count))
        self._next_id += count
        self._ask_referee(Prepare(op="prepare", sets=[SetRequest(id=i, seed=_seed())
                                                      for i in ids]))
        return ids

    def _release(self, ids: list[int]) -> None:
        self._ask_referee({"op": "release", "sets": ids})

    def _fill(self, side: str, ids: list[int], flush: bool = False) -> list[list[object]]:
        """The sets into the runner's slots; ``flush``: the caches evicted after, in the same
        request (the GPU window's one hand-off to the referee before its calls)."""
        reply = self._ask_referee({"op": "fill", "runner": RUNNER[side], "sets": ids,
                                   "flush": flush})
        return cast(list[list[object]], reply["values"])  # the trusted referee's reply

    def _attach(self, side: str, calls: int) -> None:
        """The runner's pool of ``calls`` slots, made by the referee and opened by the runner
        once, outside any window (it holds no input values until a fill). On CUDA the
        referee's reply carries the runner's arena as a file descriptor: relayed to this
        runner, the one the pool was made for, with its attach, and closed here after."""
        runner = self.runners[side]
        worker = pidtree.namespace_worker(runner.child.proc.pid) if self.host.enabled else None
        fields = self.host.pool_fields(worker)
        reply = self._ask_referee({"op": "pool", "runner": RUNNER[side], "calls": calls,
                                   "xdir": str(runner.xdir), **fields}, max_fds=ARENA_FDS)
        fds = self.ref.peer.take_fds()
        try:
            if side == "candidate":
                self._shared_sizes = _file_sizes(reply["slots"])
            slots = self.host.attached(side, worker, reply["slots"]) if fields else \
                reply["slots"]
            self._ask_runner(side, {"op": "attach", "slots": slots}, fds)
        finally:
            close_fds(fds)

    def _shared_files_cut(self) -> str:
        """Which of the files the referee shares with the candidate's runner are now shorter
        than the referee made them ("" if none): the referee reading or filling one past its
        new end dies of SIGBUS. Landlock (ABI 3+) refuses the truncation; this names the
        culprit where it could not."""
        cut = [path for path, size in self._shared_sizes.items() if _size(path) < size]
        if not cut:
            return ""
        return (f"{len(cut)} of the {len(self._shared_sizes)} files it shares with the referee "
                f"were cut short (e.g. {os.path.basename(cut[0])}): the referee, reading past "
                "their end, was killed")

    def _window(self, side: str, ids: list[int]) -> Burst:
        """One trusted window: from the first set becoming visible to the runner to the
        referee's seal (every output placed and sampled by the referee), its calls released
        one at a time (``_released``). On a CPU each set is made in a file of its own while
        all of the runner's processes are stopped (they run nothing: ``_no_escape``), the
        caches are evicted, then the clock starts. On a GPU a stopped runner's queued work is
        not stopped: a stream waiting on a word of its slots would start when the fill
        writes it, so the clock starts before the fill (``_fill_on_clock``). After every
        candidate window the GPU must be idle (``_gpu_idle``) and the sampled bytes
        unchanged (the referee's ``check``)."""
        before = self._quiet_since()
        if self.idle_ms is not None:
            reply, at_read, sealed, wall_ms, copy, timed = self._fill_on_clock(side, ids, before)
        else:
            values, sets = self._stage_host(side, ids)
            try:
                self._ask_referee({"op": "flush"})
                if side == "candidate":  # nothing of it ran while its sets were being made
                    self._no_escape(before)
                with self.gate.window():  # this evaluation's helper threads wait meanwhile
                    started = time.perf_counter_ns()
                    reply, at_read, sealed, copy, timed = self._calls(side, ids, values, sets)
                    wall_ms = (time.perf_counter_ns() - started) / 1e6
            finally:
                close_fds(sets)
            wall_ms -= self._step_credit(side, timed)
        self._window_end_us = gpu_watch.now_us()
        self.host.settle(side, copies=copy)  # where the outputs lay, judged off the clock
        if ids:
            self.ev.in_place[side] = int(sealed.get("in_place") or 0)
        if side == "candidate":  # before anything untimed: no GPU work outlives the window
            quiet = self._quiet_since()  # from here on it runs nothing until its next request
            if at_read is None and before is not None and self.runners[side].alive():
                self._escaped("could not be read at rest", BEHIND_READ)  # nothing to hold to
            self._no_escape(at_read, quiet, when=BEHIND_READ)
            self._gpu_idle()
        else:  # nothing of it ran during another runner's window
            self._no_escape(before)
        self._ask_referee({"op": "place", "runner": RUNNER[side],
                           "handles": reply.get("handles"), "where": reply.get("where")})
        if side == "reference" and self.host.enabled:
            # read in already (or copied, where we may not read a runner): held through its
            # next window as the candidate's are, and the ones before and its input sets
            # freed now, not in its next window (an empty one would take their frees for a
            # hand-off and take them off every window)
            self._ask_runner(side, {"op": "let_go"})
        released = release.credit(timed.requests, self.ev.noop)
        return Burst(len(ids), wall_ms, self.handoff_ms(), released_ms=released)

    def _fill_on_clock(self, side: str, ids: list[int], before: CpuReading | None,
                       ) -> tuple[Reply, CpuReading | None, Reply, float, bool,
                                  release.Released]:
        """A GPU window, its first fill and cache eviction on the clock: whatever the
        runner's queued work does once the fill starts is timed. The sets are staged before
        the clock in the referee's own memory, so a fill is one kernel's copy (no launch gaps
        where other work could run unseen). The first is credited back at most as much as an
        honest runner's (``honest_fill_ms``), the steps between calls likewise
        (``_step_credit``): work that slows them (kernels take turns with another context's)
        is not. The runner's processes, stopped throughout, are then read at rest, on the
        clock for every side: a candidate that resumed itself during the fill is caught.
        Returns the calls' reply, the look, the seal, the wall time less the credits,
        whether outputs were copied, and what was timed of the calls."""
        self._ask_referee({"op": "stage", "runner": RUNNER[side], "sets": ids})
        with self.gate.window():
            started = time.perf_counter_ns()
            values = self._fill(side, ids, flush=True)
            fill_ms = (time.perf_counter_ns() - started) / 1e6
            settled = self._reading(side, "filled")  # both sides pay it, as for ``_look``
            if side == "candidate":  # it ran nothing from its last request to here
                self._no_escape(before, settled)
            reply, at_read, sealed, copy, timed = self._calls(side, ids, values)
            wall_ms = (time.perf_counter_ns() - started) / 1e6
        credit = self._fill_credit(side, min(len(ids), 1), fill_ms) + \
            self._step_credit(side, timed)
        return reply, at_read, sealed, wall_ms - credit, copy, timed

    def _fill_credit(self, side: str, sets: int, fill_ms: float) -> float:
        """What of a window's fill comes off its wall time: at most what the reference's
        fills of as many sets take (``honest_fill_ms``), for every side by the same rule, so
        a fill slower than usual costs the reference what it costs the candidate (credited
        in full on the reference alone, the candidate paid the fill's spread above the median
        every window). The reference's first fills of a size, with none before to go by, are
        credited in full; the candidate's windows come after the reference's."""
        honest = honest_fill_ms(self.ev.fills, sets)
        if side != "candidate":
            self.ev.fills.setdefault(sets, []).append(fill_ms)
            if honest <= 0.0:
                return fill_ms
        return min(fill_ms, honest)

    def _step_credit(self, side: str, timed: release.Released) -> float:
        """What of a window's trusted steps comes off its wall time (``release.credit``):
        the reference's steps, this window's included, are what honest ones take."""
        if side != "candidate":
            self.ev.steps += timed.steps
        return release.credit(timed.steps, self.ev.steps)

    def _stage_host(self, side: str, ids: list[int]) -> tuple[list[list[object]], list[int]]:
        """A host window's sets, each in a file of its own made now (the runner stopped, off
        the clock): their non-tensor values and descriptors (the caller's to close)."""
        values: list[list[object]] = []
        fds: list[int] = []
        release.room_for_sets(len(ids))
        try:
            for first, chunk in release.sets_in_chunks(ids) or [(0, [])]:
                reply = self._ask_referee({"op": "stage", "runner": RUNNER[side],
                                           "sets": chunk, "first": first},
                                          max_fds=len(chunk))
                fds += self.ref.peer.take_fds()
                values += cast(list[list[object]], reply["values"])
            if len(fds) != len(ids) or len(values) != len(ids):
                raise PeerGone(f"the referee staged {len(fds)} sets of {len(ids)}")
            self.host.note_sets(side, fds)
        except BaseException:
            close_fds(fds)
            raise
        return values, fds

    def _calls(self, side: str, ids: list[int], values: list[list[object]],
               sets: Sequence[int] = ()) -> tuple[Reply, CpuReading | None, Reply, bool,
                                                  release.Released]:
        """On the clock: the runner's calls, released one at a time (``_released``), and the
        referee's seal. Returns the window's word, the look before the seal, the seal,
        whether outputs were copied, and what was timed of the calls."""
        copy = side == "candidate" and self.copy_outputs
        timed = release.Released()
        if ids:
            reply = self._released(side, values, sets, copy, timed)
        else:  # an empty window: one request, no call
            reply = self._ask_runner(side, {"op": "burst", "values": [], "copy": copy,
                                            "account": self.ACCOUNT_LOOP})
        at_read = self._look(side)  # on the clock, as the read is: each side pays its own
        self.host.read(side, reply, len(ids))  # host outputs: read in by us, on the clock
        handles, sampled = seal_words(reply.get("handles"), reply.get("where"),
                                      sampled_calls(len(ids), self._draw))
        sealed = self._ask_referee({"op": "seal", "runner": RUNNER[side],
                                    "handles": handles, "sampled": sampled})
        return reply, at_read, sealed, copy, timed

    def _released(self, side: str, values: list[list[object]], sets: Sequence[int],
                  copy: bool, timed: release.Released, noop: bool = False) -> Reply:
        """Each call's set made visible only once the call before is done: its outputs
        sampled by us (host; read whole after the window, with the runner stopped), or by
        the referee, which then copies the next set into its
        slot (a ``step``; on a host whose runners we may not read, the set is already the
        runner's file, handed over with the call). The runner runs alone for the whole
        window, as it did for one request (the referee runs only its steps). Each request
        and step is timed into ``timed``. The runner's replies merged into one word for the
        seal."""
        word = release.empty_word()
        host = side in self.host.readers
        last, named = len(values) - 1, 0  # named: the allocations the referee has heard of
        if side == "candidate":
            self._quiet = None
        with self._alone(self.runners[side], referee=host), self._polling(side):
            for j, plain in enumerate(values):
                message = release.call_message(j, plain, copy, self.ACCOUNT_LOOP, noop)
                started = time.perf_counter_ns()
                release.merge(word, self._request(side, message, sets[j:j + 1]))
                asked = time.perf_counter_ns()
                timed.requests.append((asked - started) / 1e6)
                if host and noop:  # no output to sample
                    continue
                if host:
                    self.host.sample_call(side, word["at"], j)
                    timed.steps.append((time.perf_counter_ns() - asked) / 1e6)
                elif j < last:  # the last call's outputs: the seal samples them
                    timed.steps.append(self._step(side, j, word, named))
                    named = len(word["handles"])
        return word

    def _step(self, side: str, done: int, word: Reply, named: int) -> float:
        """The referee's step after call ``done`` (``Referee.step``: the allocations named
        since the last one go with it), resumed for it alone; how long it took (ms)."""
        started = time.perf_counter_ns()
        self._ask_referee({"op": "step", "runner": RUNNER[side], "done": done,
                           "handles": word["handles"][named:],
                           "where": word["where"][done], "release": done + 1})
        return (time.perf_counter_ns() - started) / 1e6

    @contextlib.contextmanager
    def _polling(self, side: str) -> Iterator[None]:
        """On a GPU host, the parent polls for the runner's and the referee's replies
        through a window's calls (``Peer.spin_s``) rather than sleeping: a wake-up costs
        more than a fast kernel's call. Not on a CPU, where a core polling is one the runner
        does not have."""
        peers = [self.runners[side].peer, self.ref.peer] if self.idle_ms is not None else []
        for peer in peers:
            peer.spin_s = WINDOW_POLL_S
        try:
            yield
        finally:
            for peer in peers:
                peer.spin_s = 0.0

    def _noop_requests(self, calls: int) -> None:
        """What handing a call's set over costs the reference runner with no call made (its
        request's round trip: ``release.credit`` takes each window's requests off by it),
        on fresh sets as a window's, outside any window. On a GPU with the referee's steps
        between the requests, as in a window: the GPU's switch back to the runner's context
        after each step (0.1-0.2 ms on an H200) is a cost of the release, not of the call."""
        ids = self._new_sets(calls)
        timed = release.Released()
        try:
            if self.idle_ms is not None:
                values = self._fill("reference", ids)
                self._released("reference", values, [], False, timed, noop=True)
            else:
                values, sets = self._stage_host("reference", ids)
                try:
                    with self.gate.window():  # a yardstick for the windows: timed as they are
                        self._released("reference", values, sets, False, timed, noop=True)
                finally:
                    close_fds(sets)
                self._ask_runner("reference", {"op": "let_go"})  # its sets freed here, not in
                # the next window (a window keeps its sets mapped to its end)
        finally:
            self._release(ids)
        self.ev.noop += timed.requests[1:]  # the first opens a window: its own cost

    def _look(self, side: str) -> CpuReading | None:
        """A runner's processes at rest right after its reply (stopped since), the
        candidate's kept: every span a runner spends outside a request is bracketed by two
        readings, so one that resumes itself cannot finish outputs while the parent reads the
        first ones, nor while the referee seals and checks them (round 24: on a GPU, where
        the parent reads no outputs, nothing held the candidate from its reply to the reading
        after the seal). At rest (every task stopped, two sweeps agreeing), as every reading
        it is held to is: a look taken while the stop was still landing read honest runners
        on a loaded host as having run 5 ms after it. Taken on the clock for every side, on
        every device: a runner that makes its look long (many tasks to sweep, a stop slow to
        land) pays for that time itself, and the reference's own look comes off every window
        with the hand-off."""
        if self.runners.get(side) is None:
            return None
        reading = self._reading(side, "replied")
        return reading if side == "candidate" else None

    def _reading(self, side: str, kind: str) -> CpuReading | None:
        """A runner read at rest on the clock (``_at_rest``), held at least as long as the
        reference's readings of this ``kind`` take (``reading_pad_ms``): the reference's come
        off both sides with the hand-off. Every side is held by the same rule, the
        reference's own windows (empty ones included) too: held on the candidate's alone,
        the pad would cost it what a reading's spread above the median costs (0.1-0.3 ms a
        window), and a window of few calls (a large memory-bound problem) read slower."""
        started = time.perf_counter()
        reading = _at_rest(self.runners[side], LOOK_POLL_S)
        took_ms = (time.perf_counter() - started) * 1e3
        honest = self._readings.setdefault(kind, [])
        pad_ms = reading_pad_ms(took_ms, honest)
        if side == "reference":
            honest.append(took_ms)
        _hold(pad_ms)
        return reading

    def _candidate_cpu(self) -> CpuReading | None:
        """What the candidate's processes have run, at rest (``_at_rest``); None without a
        candidate runner."""
        running = self.runners.get("candidate")
        return None if running is None else _at_rest(running, REST_POLL_S)

    def _quiet_since(self) -> CpuReading | None:
        """The reading a stopped candidate is held to: the first one taken once its last
        request ended. From then until its next request its processes run nothing: not while
        the referee fills its inputs, not during another runner's window, not while its
        outputs are placed and checked (finishing unsampled outputs after the seal would be
        work no clock sees). Every later reading is compared with this one (``_no_escape``),
        so the allowance for a stop being delivered is spent once, not once a reading."""
        if self._quiet is None:
            self._quiet = self._candidate_cpu()
        return self._quiet

    def _no_escape(self, before: CpuReading | None, after: CpuReading | None = None, *,
                   when: str = OUTSIDE_CLOCK) -> None:
        """A stopped runner runs nothing: while it is stopped its processes' CPU time may not
        grow, no task may start or end, and every task must be stopped (a SIGCONT of its own,
        from a timer or anything else, would let it see the inputs of a window before the
        clock starts, or slow the reference's, or finish outputs while they are read).
        ``after``: a reading already taken, else one now."""
        if before is None:
            return
        after = after if after is not None else self._candidate_cpu()
        if after is None:
            return
        grew = after.ns - before.ns
        why = (f"ran {grew / 1e6:.2f} ms" if abs(grew) > ESCAPE_NS else
               "started or ended a thread or process" if after.tasks != before.tasks else
               "created a thread or process" if after.last_pid != before.last_pid else
               "did not stay stopped" if not (before.stopped and after.stopped) else "")
        if why:
            self._escaped(why, when)

    def _escaped(self, why: str, when: str) -> None:
        if not any(f.code == "stop_escaped" for f in self.ev.flags):
            self.ev.flags.append(Flag("stop_escaped", STOP_ESCAPED.format(why=why, when=when),
                                      "reject"))

    def handoff_ms(self) -> float:
        """A window's fixed cost (signals, requests, the seal's round trip): the median of
        the reference runner's empty windows, plus the once cost of a window of calls with
        ``alone_intercept``. Taken off every window's wall time, so a window's mean per call
        is its calls' own time (and the loop around each)."""
        empty = statistics.median(self.ev.handoff) if self.ev.handoff else 0.0
        return empty + self.ev.once_ms  # 0 but with ``alone_intercept``

    def _empty_windows(self, count: int) -> None:
        for _ in range(count):
            self.ev.handoff.append(self._window("reference", []).wall_ms)
        self._noop_requests(NOOP_CALLS)

    def _gpu_idle(self, after: str = "its timed window") -> None:
        """Reject work the candidate left running on the GPU after a request (its processes
        are stopped, its kernels are not): our tiny kernel then waits for a time slice."""
        if self.idle_ms is None:  # not a GPU
            return
        limit = max(IDLE_FLOOR_MS, IDLE_FACTOR * self.idle_ms)
        for _ in range(2):  # twice: a hiccup of the host is not a kernel left running
            probe = float(self._ask_referee({"op": "idle"})["ms"])
            if probe <= limit:
                return
            time.sleep(0.005)
        if self._others_not_candidate():
            self._round_shared = True  # another process's kernels: timed again (``_keep``)
            return
        if any(f.code == "gpu_work_left_running" for f in self.ev.flags):
            return
        self.ev.flags.append(Flag("gpu_work_left_running", f"after {after}, with its "
                                  f"processes stopped, the GPU was still busy (a kernel of ours "
                                  f"took {probe:.2f} ms against {self.idle_ms:.3f} ms idle): "
                                  "work left running outside the window the clock sees"))

    def _others_not_candidate(self) -> bool:
        """After a busy idle probe: True only when the watch saw other processes' kernels and
        none of the candidate's own after its window (one sample period past the window's end,
        its processes stopped). Anything short of that blames the candidate."""
        watch = self.shared.watch
        if not watch.on:
            return False
        self.shared.settle(periods=2)  # a sample taken a whole period after the window's end
        busy = watch.busy_since(self._window_end_us + gpu_watch.SAMPLE_PERIOD_US)
        mine = _pids_of(self.wrk)
        if not busy or any(o.pid in mine for o in busy):
            return False
        return self.shared.overlapped(self._window_end_us)

    def _check(self, side: str, ids: list[int]) -> list[CheckResult]:
        reply = self._ask_referee({"op": "check", "runner": RUNNER[side], "sets": ids,
                                   "overwritten": self.host.overwritten.get(side, []),
                                   "late": self.host.late.get(side, [])})
        return cast(list[CheckResult], reply["results"])  # the trusted referee's reply

    def _xdirs(self) -> None:
        """Each runner's exchange dir, in its own dir; a child that already ended (it refused
        to start, say) took its dir along: then the evaluation ends on what it reported."""
        for running in self.runners.values():
            if running.xdir is None:
                xdir = running.child.exchange / f"xchg-{secrets.token_hex(8)}"
                try:
                    xdir.mkdir(mode=0o700)
                    lifetime.give_to_owner_of(xdir, running.child.exchange)
                except OSError as exc:
                    raise PeerGone(f"the child ended before it started ({exc.strerror})") \
                        from None
                running.xdir = xdir

    # -- phases ----------------------------------------------------------------------------
    def start(self, reuse: Reuse | None = None) -> None:
        """The referee's setup and the reference runner's build, the window size, then the
        reference alone (the candidate not yet imported), or the alone windows ``reuse``
        returns (an earlier evaluation of the same problem)."""
        for running in self.runners.values():
            _signal(running, signal.SIGSTOP)  # they run inside their own requests only
        self._xdirs()
        self.ev.info = cast(RefereeInfo, self._ask_referee(RefereeInit(  # trusted: the referee
            op="init", init_seed=self.init_seed, probe_seed=_seed())))
        self._init_runner("reference")
        if self.job.device.startswith("cuda"):  # the GPU idle, before any candidate code
            self.idle_ms = float(self._ask_referee({"op": "idle"})["ms"])
            uuid = str(self.ev.info.get("device", {}).get("uuid") or "")
            self.shared.watch = gpu_watch.open_watch(uuid, _pids_of(self.ref))
            if self.shared.watch.on and not _namespaced(self.wrk):
                self.shared.watch = gpu_watch.GpuWatch(
                    None, None, "the candidate's runner has no PID namespace of its own: "
                                "its processes cannot be told from other processes")
        found = reuse(self.ev.info) if reuse is not None else None
        if found is not None and found[0]:  # the windows' size comes with them
            self.ev.alone, self.alone_age = found
            self.ev.calls = found[0][0].calls
            self.ev.once_ms = found[0][0].once_ms
            self._attach("reference", self.ev.calls)
            self._empty_windows(EMPTY_WINDOWS)
            self.ev.handoff = self.ev.handoff[1:]
            return
        self._attach("reference", 2 * MIN_CALLS)
        self._empty_windows(EMPTY_WINDOWS)
        self.ev.handoff = self.ev.handoff[1:]
        self._size_windows()
        if self.ev.calls != 2 * MIN_CALLS:
            self._attach("reference", self.ev.calls)
        self.time_alone()

    def _init_runner(self, side: str) -> Reply:
        outputs = self.ev.info.get("outputs") or []
        return self._ask_runner(side, {"op": "init", "init_seed": self.init_seed,
                                       "outputs": outputs, "single": len(outputs) == 1})

    def _reference_windows(self, calls: int, count: int) -> list[Burst]:
        bursts = []
        for _ in range(count):
            ids = self._new_sets(calls)
            bursts.append(self._window("reference", ids))
            self._release(ids)
        return bursts

    def _alone_windows(self) -> list[Burst]:
        if self.job.window_cost == "alone_intercept":
            return self._alone_windows_once()
        return self._alone_windows_empty()

    def _alone_windows_once(self) -> list[Burst]:
        """The reference alone, each full window beside a short one (``SHORT_CALLS`` calls:
        its seal reads as many outputs as a full window's) and an empty one on the same sets,
        the three in random order; the first three dropped. Their medians give what a window
        of calls pays once (``once_cost``), before the candidate exists: nothing it leaves
        behind can move it. Measured again after the candidate ran (``launch._fresh_alone``),
        the windows are new but the once cost stays the first."""
        iterations: list[tuple[float, float, float]] = []
        bursts = []
        calls = self.sizes()["reference"]
        short = min(SHORT_CALLS, calls)
        for _ in range(ALONE_ONCE_BURSTS + 1):
            ids = self._new_sets(calls)
            wall: dict[str, float] = {}
            order = ["full", "short", "empty"]
            self._rng.shuffle(order)
            for kind in order:
                if kind == "empty":
                    self._empty_windows(1)
                    wall[kind] = self.ev.handoff[-1]
                    continue
                burst = self._window("reference", ids if kind == "full" else ids[:short])
                wall[kind] = burst.wall_ms
                if kind == "full":
                    bursts.append(burst)
            iterations.append((wall["full"], wall["short"], wall["empty"]))
            self._release(ids)
        if not self.candidate_ran:
            self.ev.once_ms = once_cost(calls, short, iterations[1:])
        empty = statistics.median(e for _f, _o, e in iterations[1:])
        return [replace(b, handoff_ms=empty + self.ev.once_ms, once_ms=self.ev.once_ms)
                for b in bursts]

    def _alone_windows_empty(self) -> list[Burst]:
        """The reference alone, each window followed by an empty one; every window's hand-off
        the median of those empty ones (taken in the same conditions, before the candidate is
        imported; not the few at the start, which a stall can hold: on an H200 a reference
        alone read 0.99 ms a call against 1.80 ms interleaved and 1.76 ms independently).
        The first one (discarded by ``time_alone``) and the settled ones (``_settled``)."""
        return self._settled(self.sizes()["reference"], empty_after=True)

    def _settled(self, calls: int, empty_after: bool) -> list[Burst]:
        """Windows of the reference alone until the last ``ALONE_BURSTS`` agree (the slowest
        within ``ALONE_SETTLED`` of the fastest a call) or ``ALONE_MOST`` ran: a runner's
        first windows after its pool is made pay its first touches (on a 2-core host three
        windows of an honest reference read 1.74, 1.03 and 0.52 ms a call against 0.41–0.46
        interleaved, and held the cap on a slowed reference that much looser). Returns the
        window before the settled ones, then those; each with the median of the empty
        windows that followed them as its hand-off."""
        bursts: list[Burst] = []
        empties: list[float] = []
        while len(bursts) < ALONE_MOST:
            bursts += self._reference_windows(calls, 1)
            if empty_after:
                self._empty_windows(1)
                empties.append(self.ev.handoff[-1])
            else:
                empties.append(self._window("reference", []).wall_ms)
            handoff = statistics.median(empties[-ALONE_BURSTS:])
            if len(bursts) > ALONE_BURSTS and _agree(bursts[-ALONE_BURSTS:], handoff):
                break
        else:
            if not any(f.code == "alone_unsettled" for f in self.ev.flags):
                self.ev.flags.append(Flag("alone_unsettled", f"the reference's windows alone "
                                          f"did not agree within {ALONE_SETTLED - 1:.0%} a "
                                          f"call in {ALONE_MOST} windows: the last "
                                          f"{ALONE_BURSTS} kept", "info"))
        return [replace(b, handoff_ms=handoff) for b in bursts[-ALONE_BURSTS - 1:]]

    def _size_windows(self) -> None:
        """A window of the reference of ``2 * MIN_CALLS`` calls (after one that pays the
        one-time costs), less the hand-off, gives a call's time; it sizes the reference's
        windows (every side's are sized again once the candidate has run, ``_size_sides``)."""
        self._progress("reference", 0, ALONE_BURSTS, "sizing the timed windows")
        window = self._reference_windows(2 * MIN_CALLS, 2)[-1]
        self.ev.calls = self._calls_for(window.mean_ms())

    def _calls_for(self, per_call_ms: float) -> int:
        return calls_for(per_call_ms, self.handoff_ms(), int(self.ev.info.get("set_bytes") or 1),
                         self.ev.info, self.job.device)

    def time_alone(self) -> None:
        """The reference's windows before the candidate is imported: a discarded one, then
        ``ALONE_BURSTS`` kept (timed again while another process's kernels overlapped them)."""
        self._progress("reference", 0, ALONE_BURSTS, "the reference alone")
        while True:
            start = gpu_watch.now_us()
            bursts = self._alone_windows()
            self.shared.settle()
            shared = self.shared.overlapped(start)
            if not (shared and self.shared.drop()):
                break
        if shared and self.ev.once_ms and not self.candidate_ran:  # other work in it: not a
            self.ev.once_ms = 0.0                                   # cost of ours to take off
            bursts = [replace(b, handoff_ms=b.handoff_ms - b.once_ms, once_ms=0.0)
                      for b in bursts]
        self.ev.alone, self.alone_age, self.alone_shared = bursts[1:], None, shared

    def build(self) -> None:
        self._progress("build", 0, 1, "importing and compiling the candidate")
        self.candidate_ran = True
        self._settings(self._init_runner("candidate"))
        self._attach("candidate", self.ev.calls)
        self._progress("build", 1, 1, "")

    def _settings(self, reply: Reply) -> None:
        changed = reply.get("settings_changed")
        if isinstance(changed, dict):
            self.ev.settings_changed = changed
        self.ev.precision = precision.classify(self.ev.settings_changed,
                                               self.job.candidate_source, self.job.device)

    def correctness(self) -> None:
        trials = self.job.correctness_trials
        for t in range(trials):
            self._progress("correctness", t, trials)
            ids = self._new_sets(1)
            values = self._fill("candidate", ids * 2)  # one set in slots 0 and 1
            reply = self._ask_runner("candidate", {"op": "trial", "values": values})
            self.host.read("candidate", reply, 2)
            self.host.settle("candidate", window=False)
            self._settings(reply)
            metas = read_metas(reply.get("outputs"), 2)
            self._ask_referee({"op": "seal", "runner": RUNNER["candidate"],
                               "sampled": [[j, None] for j in sampled_calls(2, self._draw)]})
            self._ask_referee({"op": "expect", "sets": ids})
            results = self._check("candidate", ids)
            self._release(ids)
            trial = self._trial_report(t, results, metas)
            self.ev.trials.append(trial)
            if not trial.ok:
                break
        self._progress("correctness", trials, trials)

    def _trial_report(self, t: int, results: list[CheckResult],
                      metas: list[OutputMeta]) -> TrialReport:
        self._output_flags(metas)
        self._mutation_flags(results)
        bad = next((r for r in results if not r.get("ok")), None)
        message = ""
        if bad is not None:
            which = "first call" if bad is results[0] else "second call"
            message = output_message(metas, self.ev.info) or f"{which}: {bad.get('message')}"
        return TrialReport(t, bad is None, max(float(r.get("abs", 0)) for r in results),
                           max(float(r.get("rel", 0)) for r in results), message)

    def _output_flags(self, metas: list[OutputMeta]) -> None:
        """The candidate's own word that it hands out a buffer it overwrites later: a warning
        for the user who drops the module in (every delivered output was copied and checked,
        so it moves no measurement)."""
        if any(m.get("reused") for m in metas):
            self.ev.flags.append(Flag("output_buffer_reused", OUTPUT_REUSED_MESSAGE, "warn"))

    def _mutation_flags(self, results: list[CheckResult]) -> None:
        for r in results:
            for j in r.get("mutated") or []:
                self.ev.flags.append(Flag("input_mutation", f"the candidate writes into its "
                                          f"input #{j} in place (an in-place activation?); the "
                                          "reference leaves its inputs unchanged"))

    def add_matched(self, runner: Running, side: str = "matched") -> None:
        """Time the reference in a runner of its own, built under other settings from its
        first op on (cuDNN keeps plans chosen earlier): ``matched``, the candidate's
        precision; ``one_thread``, also one intra-op thread (``thread_budget``)."""
        self.runners[side] = runner
        runner.child.gate = self.gate
        _signal(runner, signal.SIGSTOP)
        self._xdirs()
        self._init_runner(side)
        self._attach(side, self.ev.calls)

    def timing(self) -> None:
        self._round(keep=False)  # first calls: lazy builds, allocations, mappings
        self._round(keep=False)  # sizes every side's windows
        if self._size_sides():
            self._round(keep=False)  # the new slots' first touch, untimed
        self._alone_at_size()
        started = time.monotonic()  # one timing budget, however often the rounds start over
        self._timed_rounds(started)
        if self._resized_from_timed():  # the sizing round ran far slower than the timed ones
            self._round(keep=False)
            self._alone_at_size()
            self._timed_rounds(started)
        self.shared.settle()
        self._settle_kept()
        self.ev.timed = True

    def _timed_rounds(self, started: float) -> None:
        job = self.job
        calls = max(self.sizes().values())
        most = max(MIN_BURSTS, math.ceil(job.max_samples / calls))
        least = max(MIN_BURSTS, math.ceil(job.min_samples / calls))
        while len(self.ev.candidate) < most:
            self._round(keep=True)
            self._progress("timing", len(self.ev.candidate), most)
            if self.ev.recheck.mismatches:
                break
            elapsed = time.monotonic() - started
            if len(self.ev.candidate) >= least and (self._stable() or
                                                    elapsed > job.timing_budget_s):
                break

    def _alone_at_size(self) -> None:
        """The reference alone again (the candidate stopped), at the calls its timed windows
        hold when that is not what the alone phase held: a cost a window pays once weighs on
        each call by the number of calls, so the cap on a slowed reference is held to the
        lower of the two alone figures (round 12: sized apart, the alone phase read up to
        2.5 times the interleaved reference a call, and the 5 % cap was that much looser)."""
        self.ev.alone_sized = []
        if not self.ev.alone or self.sizes()["reference"] == self.ev.alone[0].calls:
            return
        sized = self._settled(self.sizes()["reference"], empty_after=False)[1:]
        self.ev.alone_sized = [replace(b, handoff_ms=b.handoff_ms + self.ev.once_ms,
                                       once_ms=self.ev.once_ms) for b in sized]

    def _resized_from_timed(self) -> bool:
        """Sized again from the timed rounds' own medians when a side's windows hold under
        half the work they were sized for (a side far slower in the sizing round than when
        timed: a sandbag there picks every side's calls, down to four, and a cost a window
        pays once then weighs on each call four times as much). The timed rounds are dropped
        and run again at the new size; True when they are to be."""
        if self.ev.recheck.mismatches:
            return False
        timed = self.ev.timed_sides()
        per_call = {side: statistics.median(means(b)) for side, b in timed.items()
                    if side in self.runners and means(b)}
        if set(per_call) != set(self.runners):
            return False
        wanted = {side: self._calls_for(ms) for side, ms in per_call.items()}
        sized = undersized(per_call, wanted, self.sizes())
        if sized is None:
            return False
        self.ev.flags.append(Flag("windows_resized", "the windows were sized from an untimed "
                                  "round that ran far slower than the timed ones: sized again "
                                  "from the timed rounds and timed again", "info"))
        self._resize(sized)
        for windows in timed.values():
            windows.clear()
        self.ev.round_handoff, self._kept_span = [], None
        return True

    def sizes(self) -> dict[str, int]:
        """Calls per window of each runner: the reference's from its own time until the sides
        are sized together (``_size_sides``)."""
        return {side: self.ev.side_calls.get(side, self.ev.calls) for side in self.runners}

    def _size_sides(self) -> bool:
        """After the untimed rounds (the second one, past first-call costs), every side sized
        at once, the same (``sized_together``), from its window of that round (a copy of the
        reference sized apart from it, with 291 calls a window against 31, once read 1.31x).
        True when a size changed (those pools made again)."""
        per_call = {side: b.mean_ms() for side, b in self._last.items() if b.calls}
        wanted = {side: self._calls_for(ms) for side, ms in per_call.items()}
        return self._resize(sized_together(per_call, wanted))

    def _resize(self, sized: dict[str, int]) -> bool:
        """Each side's pool made again where its calls a window change; True when one did."""
        changed = {side: calls for side, calls in sized.items() if calls != self.sizes()[side]}
        for side, calls in changed.items():
            self.ev.side_calls[side] = calls
            self._attach(side, calls)
        return bool(changed)

    def _stable(self) -> bool:
        sides = [s for side, s in self.ev.timed_sides().items()
                 if s or side in ("reference", "candidate")]
        return all(median_rel_ci(means(s)) <= self.job.stable_rel_ci for s in sides)

    def _round(self, keep: bool) -> None:
        """Each runner's window on fresh sets of its own (its own number of calls), and an
        empty one, in random order; the candidate's outputs checked against their reference
        outputs right after its window, while it is stopped."""
        sizes = self.sizes()
        start, self._round_shared = gpu_watch.now_us(), False
        order = [*self.runners, ""]
        self._rng.shuffle(order)
        bursts: dict[str, Burst] = {}
        results: list[CheckResult] = []
        empty = 0.0
        for side in order:
            if not side:
                empty = self._window("reference", []).wall_ms
                continue
            bursts[side], checked = self._side_window(side, sizes[side])
            if side == "candidate":
                results = checked
        if self.copy_outputs and any(r.get("reused") for r in results):
            self._copies_not_made()  # copying, outputs still share memory: no call unchecked
        retimed = any(r.get("reused") for r in results) and not self.copy_outputs
        claimed = False
        for side in self.runners:
            described = self._ask_runner(side, {"op": "describe"})
            if side == "candidate":
                metas = read_metas(described.get("outputs"), sizes[side])
                claimed = any(m.get("reused") for m in metas)
                self._output_flags(metas)
        checked = results
        if claimed and self.host.readers and not self.copy_outputs:
            # host outputs read after the window: one the candidate says a later call freed
            # or overwrote was gone by then. Its word drops only the failure of a call whose
            # step sample, read before any later call, passed (``_step_judged``), and makes
            # it copy (slower); every call of every later window is still checked
            retimed = True
            results = [r for r in results if r.get("ok") or not r.get("step_agreed")]
        if self.host.held_over.get("candidate"):
            retimed = self._held_over() or retimed
        if retimed:  # this round's candidate window too: only its last call could be checked
            self._time_again_with_copies()
        self._mutation_flags(checked)  # an input is the referee's own, freed output or not
        self._trusted_output_flags(results)
        self._recheck(results)
        self._last = bursts
        if not keep or (not retimed and self._keep(bursts, start)):
            self.ev.handoff.append(empty)  # a dropped round's hand-off is dropped with it
            if keep:  # not the untimed first rounds (first touches, mappings)
                self.ev.round_handoff.append(empty)

    def _side_window(self, side: str, calls: int) -> tuple[Burst, list[CheckResult]]:
        """One side's window of a round on sets made for it alone, released after it (the
        candidate's once checked against reference outputs made after its window, from the
        referee's own copies: made before it, only the candidate's window would follow that
        GPU work). No two sides share a set: the inputs of a window are in no memory before
        its fill, and no other runner's outputs answer them (round 24: a runner that reached
        the reference's arena or outputs would otherwise find its own coming inputs, or
        their answers, there)."""
        ids = self._new_sets(calls)
        burst = self._window(side, ids)
        results: list[CheckResult] = []
        if side == "candidate":  # reference outputs after its window: every side's window
            self._ask_referee({"op": "expect", "sets": ids})  # follows the same GPU work
            results = self._step_judged(self._check("candidate", ids))
        self._release(ids)
        return burst, results

    def _step_judged(self, results: list[CheckResult]) -> list[CheckResult]:
        """Host outputs, not copying: each failing call marked ``step_agreed`` where the
        referee finds its step sample (read when the call said it was done, before a later
        call could free it: ``HostOutputs.sample_call``) within tolerance of the expected
        output. Only such a call's failure may be laid to the candidate's word that a later
        call freed its output (``_round``). Asked only when a call failed."""
        failed = [j for j, r in enumerate(results) if not r.get("ok")]
        if not failed or self.copy_outputs or "candidate" not in self.host.readers:
            return results
        agreed: set[int] = set()
        for start in range(0, len(failed), STEP_JUDGED_CALLS):
            samples = self.host.step_samples("candidate", failed[start:start + STEP_JUDGED_CALLS])
            reply = self._ask_referee({"op": "sampled", "runner": RUNNER["candidate"],
                                       "samples": samples})
            agreed |= set(cast(list[int], reply["agreed"]))
        return [{**r, "step_agreed": True} if j in agreed and not r.get("ok") else r
                for j, r in enumerate(results)]

    def _keep(self, bursts: dict[str, Burst], start: int) -> bool:
        """A round's windows kept, unless another process's kernels overlapped them (then
        the loop times another round); the last kept round is judged again once the samples
        after it are in. True when kept."""
        self._settle_kept()
        shared = self._round_shared or self.shared.overlapped(start)
        if shared and self.shared.drop():
            return False
        for side, windows in self.ev.timed_sides().items():
            if side in bursts:
                windows.append(bursts[side])
        self._kept_span = None if shared else start
        return True

    def _settle_kept(self) -> None:
        """The last kept round, judged with the samples taken since: dropped when another
        process used the card after it began (conservative: its work may have come later)."""
        start, self._kept_span = self._kept_span, None
        if start is None or not (self.shared.overlapped(start) and self.shared.drop()):
            return
        for windows in self.ev.timed_sides().values():
            if windows:
                windows.pop()
        if self.ev.round_handoff:  # its hand-off with it (the current round's comes after)
            self.ev.round_handoff.pop()

    def _held_over(self) -> bool:
        """The parent saw an output where the last window's, still held, lay (host
        outputs): a buffer reused across windows. Rejected (the reward policy's static
        outputs rule) and timed again with copies; seen again once copying, the copies
        were not made. True when the windows are to be timed again."""
        if self.copy_outputs:
            self._copies_not_made()
            return False
        self._flag_once("output_buffer_reused", HELD_OVER)
        return True

    def _copies_not_made(self) -> None:
        """Timed with copies, outputs still share memory or lie where held ones lay: the
        copies asked for were not made. A reject under every reward policy (under
        ``static_outputs=full`` a call whose memory a later call took is never compared)."""
        self._flag_once("copies_not_made", COPIES_NOT_MADE)

    def _flag_once(self, code: str, reason: str) -> None:
        """A reject the trusted side saw, once per evaluation (the first reason stands)."""
        if code not in {f.code for f in self.ev.flags}:
            self.ev.flags.append(Flag(code, reason, "reject"))

    def _time_again_with_copies(self) -> None:
        """Outputs of different calls share memory: only a window's last call could be
        checked. From now on the candidate copies each output into the referee's buffer
        before its next call (as code that keeps its outputs must), every call is checked,
        and the copies are its own time; the windows timed so far are dropped."""
        self.copy_outputs = True
        self._kept_span = None  # the round it judged is gone with the rest
        for windows in self.ev.timed_sides().values():
            windows.clear()

    def _trusted_output_flags(self, results: list[CheckResult]) -> None:
        """What the referee saw itself: outputs sharing memory across calls, outputs still
        being written after the window closed."""
        if any(r.get("reused") for r in results):
            self._flag_once("output_buffer_reused", REUSED_SEEN)
        if any(r.get("late") for r in results):
            self._flag_once("work_after_window", LATE_SEEN)

    def _recheck(self, results: list[CheckResult]) -> None:
        """The timed calls checked: each one compared with the reference, and each one that
        failed (a late or moved output fails uncompared); a reused call that did not fail was
        never judged and is not counted."""
        rc = self.ev.recheck
        for r in results:
            if r.get("ok") and not r.get("compared"):
                continue
            rc.compared += 1
            if not r.get("ok"):
                rc.mismatches += 1
                rc.detail = rc.detail or f"timed call {rc.compared}: {r.get('message')}"

    def settle_handoff(self) -> None:
        """The timed rounds' windows, each with the median hand-off of all kept rounds' empty
        windows (one a round, in random order among its windows), not the median so far when
        it was taken, and never above ``HANDOFF_CAP`` times the alone phase's (empty windows
        slowed beside the candidate take off no more); the alone windows have theirs
        (``_alone_windows``). With ``alone_intercept``, plus the once cost of a window of calls
        measured on the reference alone: in full on the trusted sides' windows; on the
        candidate's at most ``ONCE_SHARE`` of each window's wall time (a runner of its own
        that pays less than ours once earns no more than that), and not at all when its
        windows were sized for a slower candidate (``_sized_right``)."""
        if not self.ev.round_handoff:
            return
        ev = self.ev
        handoff = statistics.median(ev.round_handoff)
        if ev.alone:
            handoff = min(handoff, HANDOFF_CAP * (ev.alone[0].handoff_ms - ev.alone[0].once_ms))
        once, share = ev.once_ms, ONCE_SHARE if self._sized_right(ev.candidate) else 0.0

        def settled(b: Burst, most: float) -> Burst:
            credit = min(once, most * b.wall_ms)
            return replace(b, handoff_ms=handoff + credit, once_ms=credit)

        ev.reference = [settled(b, 1.0) for b in ev.reference]
        ev.matched = [settled(b, 1.0) for b in ev.matched]
        ev.one_thread = [settled(b, 1.0) for b in ev.one_thread]
        ev.candidate = [settled(b, share) for b in ev.candidate]
        if once > 0:
            ev.flags.append(Flag("window_once_cost", f"a window of calls pays {once:.3f} ms once "
                                 "beyond an empty window (measured on the reference alone, "
                                 "before the candidate was imported): taken off the reference's "
                                 "windows" + (f", and at most {ONCE_SHARE:.0%} of each of the "
                                              "candidate's" if share else ""), "info"))

    def _sized_right(self, bursts: list[Burst]) -> bool:
        """The candidate's windows hold the work they were sized for: its calls per window were
        chosen from an untimed round, and a candidate that ran there more than twice as slow
        as in the timed rounds (while memory allowed larger windows) has windows that hold
        little work, where a once cost taken off would pay most (``window_once_skipped``)."""
        if not bursts or self.ev.once_ms <= 0:
            return True
        per_call = statistics.median(means(bursts))
        if self._calls_for(per_call) <= 2 * self.sizes().get("candidate", self.ev.calls):
            return True
        self.ev.flags.append(Flag("window_once_skipped", "the candidate's windows were sized "
                                  "from an untimed round in which it ran more than twice as "
                                  "slow as in the timed ones: a window's once cost is not taken "
                                  "off them", "info"))
        return False

    def retire(self, side: str) -> None:
        """One runner told to finish and waited for until it exits (its PID namespace, and so
        every process and GPU context it made, gone), before a measurement that must owe it
        nothing; ``finish`` later finds it gone."""
        running = self.runners.get(side)
        if running is None:
            return
        _signal(running, signal.SIGCONT)
        with contextlib.suppress(PeerGone):
            running.peer.send({"op": "finish"})
        if running.thread is not None:
            running.thread.join()

    def finish(self) -> None:
        self._no_escape(self._quiet)  # the last window's outputs placed and checked meanwhile
        self.ev.flags.extend(self.shared.flags())
        self.host.close()
        for running in self.children():
            _signal(running, signal.SIGCONT)
            with contextlib.suppress(PeerGone):
                running.peer.send({"op": "finish"})


def _namespaced(running: Running) -> bool:
    """Whether a live child runs in a PID namespace of its own (its processes then all lie
    under that namespace's init)."""
    with contextlib.suppress(Exception):
        return bool(running.child.members())
    return False


def _pids_of(running: Running) -> set[int]:
    """The host pids of a child: its outer process and its namespace's processes."""
    pids = {running.child.proc.pid}
    with contextlib.suppress(Exception):
        pids |= set(running.child.members())
    return pids


def output_message(metas: list[OutputMeta], info: RefereeInfo) -> str:
    """A plain message for an output of the wrong kind, dtype or shape (as the runner says)."""
    expected = info.get("outputs") or []
    device = info.get("device", {}).get("type", "")
    for meta in metas:
        items = meta.get("items") or []
        if len(items) != len(expected):
            return f"the candidate returns {len(items)} output(s); the reference returns " \
                   f"{len(expected)}"
        for i, (got, exp) in enumerate(zip(items, expected, strict=True)):
            where = f"output {i}: " if len(expected) > 1 else ""
            if got.get("type") != "Tensor":
                return f"{where}the candidate returns a {got.get('type')}, not a torch.Tensor"
            got_device = str(got.get("device") or "")
            if device and got_device and got_device.split(":")[0] != device:
                return (f"{where}the candidate returns a tensor on {got_device}; the reference's "
                        f"output is on {device}")
            if got.get("dtype") != exp.get("dtype"):
                return (f"{where}the candidate returns {got.get('dtype')}; the reference "
                        f"returns {exp.get('dtype')}")
            if got.get("shape") != exp.get("shape"):
                return (f"{where}the candidate returns shape {tuple(got.get('shape') or ())}; "
                        f"the reference returns {tuple(exp.get('shape') or ())}")
    return ""


def spawn(mode: str, job: Job, limits: sandbox.Limits, text: str, tag: str = "") -> Running:
    child = warm.take(mode, job.device, limits, text, job.build_dir, tag=tag)
    if child is None:
        child = sandbox.Child(mode, limits, job_text=text, talk=True,
                              writable=writable_for(mode))
    if child.talk is None:
        child.discard()
        raise RuntimeError(f"the {mode} child has no talk socket")
    return Running(child, Peer(child.talk))


def wait_on(running: Running, text: str, job: Job, limits: sandbox.Limits,
            cancel: threading.Event | None, on_progress: sandbox.ProgressFn | None) -> None:
    def target() -> None:
        running.outcome = running.child.run(text, job.timeout_s, limits=limits, cancel=cancel,
                                            on_progress=on_progress)

    running.thread = threading.Thread(target=target, daemon=True, name="eval-child")
    running.thread.start()
