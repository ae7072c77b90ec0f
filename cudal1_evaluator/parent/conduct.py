"""The parent's side of one evaluation (torch-free): two children, one schedule, one clock.

The referee (trusted) and the worker (the candidate's process) run at once; the parent owns the
seeds (``os.urandom``), the schedule and the wall clock (``time.perf_counter_ns``), relays the
protocol (``cudal1_evaluator.wire.talk``) and collects ``Evidence``: what the referee checked and
timed, and the worker's raw times bracketed by the parent's clock. The worker is stopped
(SIGSTOP on its process group) whenever it is not serving a request, so nothing it leaves
running competes with the referee, and the referee freezes its outputs the moment it stops.
The referee is stopped in turn while the worker serves one: its idle OpenMP threads spin for
milliseconds after each parallel op, and on a small host that spin took a core from the
worker's cache flush, which the wall-clock cross-check then read as the candidate's.

A candidate that turns ``cudnn.benchmark`` on gets a second referee for the matched reference,
under the candidate's settings from its first op on: cuDNN keys its plan cache without the
benchmark flag, so a referee that ran the reference strict first kept the heuristic plans and
the matched reference lost the benchmarked ones (14 % of credit on an H100).
"""

from __future__ import annotations

import contextlib
import os
import random
import secrets
import signal
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from cudal1_evaluator.isolation import sandbox
from cudal1_evaluator.isolation.sandbox_layers import writable_for
from cudal1_evaluator.parent import precision, warm
from cudal1_evaluator.parent.timing_checks import Burst
from cudal1_evaluator.schema import OUTPUT_REUSED_MESSAGE, Flag, Job, TrialReport
from cudal1_evaluator.stats import median_rel_ci
from cudal1_evaluator.verdict_details import PrecisionInfo, SettingsChanged
from cudal1_evaluator.wire.report import Recheck
from cudal1_evaluator.wire.talk import Peer, PeerGone, Reply, read_int, read_metas, read_times
from cudal1_evaluator.wire.talk_messages import (
    CheckResult,
    MatchedSettings,
    OutputMeta,
    Prepare,
    RefereeInfo,
    RefereeInit,
    SetRequest,
    SlotDesc,
)

BURST = 4  # fresh input sets per burst
# The speedup is a median of burst means, so the loop may stop only once that statistic is
# stable, and never before this many bursts: with 4, two bursts that each held one call
# preempted by a busy host moved a speedup by 17 % (H100, cold nvcc builds beside it).
MIN_BURSTS = 6
MAP_FLOOR_MS, MAP_PER_TENSOR_MS = 250.0, 25.0  # bound on the worker's untimed mapping
ALONE_BURSTS = 3  # the reference alone, before the worker starts


@dataclass
class Evidence:
    """What the trusted side measured and decided, plus the worker's raw times."""

    info: RefereeInfo = field(default_factory=RefereeInfo)  # the referee's init reply
    trials: list[TrialReport] = field(default_factory=list)
    recheck: Recheck = field(default_factory=Recheck)
    flags: list[Flag] = field(default_factory=list)
    alone: list[Burst] = field(default_factory=list)
    reference: list[Burst] = field(default_factory=list)
    matched: list[Burst] = field(default_factory=list)
    candidate: list[Burst] = field(default_factory=list)
    late: int = 0
    slow_maps: int = 0
    settings_changed: SettingsChanged = field(default_factory=dict)
    precision: PrecisionInfo = field(default_factory=PrecisionInfo)
    referee_error: str = ""
    protocol_error: str = ""
    timed: bool = False


@dataclass
class Running:
    """A child being waited for on a thread, while the parent talks to it."""

    child: sandbox.Child
    peer: Peer
    outcome: sandbox.Outcome | None = None
    thread: threading.Thread | None = None

    def alive(self) -> bool:
        return self.outcome is None and self.child.alive()


def _signal(running: Running, sig: signal.Signals) -> None:
    """SIGSTOP or SIGCONT to a child's whole process group (its threads and helpers)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(running.child.proc.pid, sig)


def _seed() -> int:
    return int.from_bytes(os.urandom(8), "little") & ((1 << 63) - 1)


class Conductor:
    def __init__(self, job: Job, referee: Running, worker: Running,
                 on_progress: sandbox.ProgressFn | None) -> None:
        self.job, self.ref, self.wrk = job, referee, worker
        self.ev = Evidence()
        self.on_progress = on_progress
        self._next_id = 0
        self._rng = random.Random(os.urandom(16))
        self.xdir = worker.child.exchange / f"xchg-{secrets.token_hex(8)}"
        self.alone_age: float | None = None  # set when the alone bursts are reused
        self.mref: Running | None = None  # the matched reference's own referee, if any
        self._mapped = 0  # tensors in the burst the worker holds until ``unmap``

    def children(self) -> list[Running]:
        return [self.ref, self.wrk] + ([self.mref] if self.mref is not None else [])

    # -- plumbing --------------------------------------------------------------------------
    def _progress(self, stage: str, done: int, total: int, note: str = "") -> None:
        if self.on_progress is not None:
            with contextlib.suppress(Exception):
                self.on_progress(stage, done, total, note)

    @contextlib.contextmanager
    def _alone(self, running: Running) -> Iterator[None]:
        """Only ``running`` runs while it serves a request: the worker waits stopped outside
        its own requests, and the referees are stopped for the length of another's."""
        others = [r for r in (self.ref, self.mref) if r is not None and r is not running]
        for other in others:
            _signal(other, signal.SIGSTOP)
        if running is self.wrk:
            _signal(self.wrk, signal.SIGCONT)
        try:
            yield
        finally:
            if running is self.wrk:
                _signal(self.wrk, signal.SIGSTOP)
            for other in others:
                _signal(other, signal.SIGCONT)

    def _ask_referee(self, message: Mapping[str, object],
                     referee: Running | None = None) -> Reply:
        referee = referee or self.ref
        try:
            with self._alone(referee):
                return referee.peer.request(message, self.job.timeout_s, referee.alive)
        except PeerGone as exc:
            self.ev.referee_error = self.ev.referee_error or str(exc)
            raise

    def _ask_worker(self, message: Mapping[str, object]) -> tuple[Reply, float]:
        """(reply, parent wall ms from send to reply); the worker runs only inside this."""
        try:
            with self._alone(self.wrk):
                started = time.perf_counter_ns()
                reply = self.wrk.peer.request(message, self.job.timeout_s, self.wrk.alive)
                wall_ms = (time.perf_counter_ns() - started) / 1e6
        except PeerGone as exc:
            self.ev.protocol_error = self.ev.protocol_error or str(exc)
            raise
        return reply, wall_ms

    def _new_sets(self, count: int, copies: int) -> tuple[list[int], dict[str, SlotDesc]]:
        ids = list(range(self._next_id, self._next_id + count))
        self._next_id += count
        sets = [SetRequest(id=i, seed=_seed(), copies=copies) for i in ids]
        reply = self._ask_referee(Prepare(op="prepare", sets=sets))
        if self.mref is not None:  # the same inputs for its matched bursts, no worker copies
            mirrored = [SetRequest(id=s["id"], seed=s["seed"], copies=0) for s in sets]
            self._ask_referee(Prepare(op="prepare", sets=mirrored), self.mref)
        return ids, cast(dict[str, SlotDesc], reply["slots"])  # the trusted referee's reply

    def _release(self, ids: list[int]) -> None:
        for referee in (self.ref, self.mref):
            if referee is not None:
                self._ask_referee({"op": "release", "sets": ids}, referee)

    def _reference_burst(self, ids: list[int], mode: str) -> Burst:
        referee = self.mref if mode == "matched" and self.mref is not None else self.ref
        started = time.perf_counter_ns()
        reply = self._ask_referee({"op": "reference", "sets": ids, "precision": mode}, referee)
        wall_ms = (time.perf_counter_ns() - started) / 1e6
        return Burst(read_times(reply.get("times_ms"), len(ids)), wall_ms)

    # -- phases ----------------------------------------------------------------------------
    def start(self, reuse: Any = None) -> None:
        """The referee's setup, then the reference alone (the worker stopped), or the alone
        bursts ``reuse(info)`` returns (an earlier evaluation of the same problem)."""
        self.xdir.mkdir(mode=0o700)
        self.init_seed = _seed()
        self.ev.info = cast(RefereeInfo, self._ask_referee(RefereeInit(  # trusted: the referee
            op="init", init_seed=self.init_seed, probe_seed=_seed(), xdir=str(self.xdir))))
        found = reuse(self.ev.info) if reuse is not None else None
        if found is not None:
            self.ev.alone, self.alone_age = found
            return
        self.time_alone()

    def time_alone(self) -> None:
        """The reference's bursts with the worker stopped (before its first request a worker
        may still be setting up: importing torch, installing guards, on the same cores). A
        discarded burst of one set first: the referee's first burst pays its one-time costs
        (the flush buffer's pages, the sinks' first mapping), 15-34 ms a call on a 2-core
        host against 8 ms after, and as the p90 of the overheads that calibrate the
        wall-clock check it let 20 ms of hidden work a call pass unflagged."""
        self._progress("reference", 0, ALONE_BURSTS, "the reference alone")
        _signal(self.wrk, signal.SIGSTOP)  # it runs again inside its first request
        bursts = []
        for size in [1] + [BURST] * ALONE_BURSTS:
            ids, _slots = self._new_sets(size, 0)
            bursts.append(self._reference_burst(ids, "strict"))
            self._release(ids)
        self.ev.alone, self.alone_age = bursts[1:], None

    def build(self) -> None:
        self._progress("build", 0, 1, "importing and compiling the candidate")
        outputs = self.ev.info.get("outputs") or []
        reply, _ = self._ask_worker({"op": "init", "init_seed": self.init_seed,
                                     "outputs": outputs, "single": len(outputs) == 1})
        self._settings(reply)
        self._progress("build", 1, 1, "")

    def _settings(self, reply: Reply) -> None:
        changed = reply.get("settings_changed")
        if isinstance(changed, dict):
            self.ev.settings_changed = changed
        self.ev.precision = precision.classify(self.ev.settings_changed,
                                               self.job.candidate_source)

    def correctness(self) -> None:
        trials = self.job.correctness_trials
        for t in range(trials):
            self._progress("correctness", t, trials)
            ids, slots = self._new_sets(1, 2)
            names = [f"{ids[0]}/0", f"{ids[0]}/1"]
            reply, _ = self._ask_worker({"op": "trial", "slots": [slots[n] for n in names]})
            self._settings(reply)
            metas = read_metas(reply.get("outputs"), 2)
            self._ask_referee({"op": "seal", "slots": names})
            self._reference_burst(ids, "strict")
            results = self._check(names)
            self._release(ids)
            trial = self._trial_report(t, results, metas)
            self.ev.trials.append(trial)
            if not trial.ok:
                break
        self._progress("correctness", trials, trials)

    def _check(self, names: list[str]) -> list[CheckResult]:
        reply = self._ask_referee({"op": "check", "slots": names})
        return cast(list[CheckResult], reply["results"])  # the trusted referee's reply

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
        if any(m.get("reused") for m in metas):
            self.ev.flags.append(Flag("output_buffer_reused", OUTPUT_REUSED_MESSAGE))

    def _mutation_flags(self, results: list[CheckResult]) -> None:
        for r in results:
            for j in r.get("mutated") or []:
                self.ev.flags.append(Flag("input_mutation", f"the candidate writes into its "
                                          f"input #{j} in place (an in-place activation?); the "
                                          "reference leaves its inputs unchanged"))

    def add_matched_referee(self, referee: Running) -> None:
        """Time the matched reference in ``referee``, a fresh one under the candidate's
        settings from its first op on (same init seed, hence the same weights)."""
        xdir = referee.child.exchange / f"xchg-{secrets.token_hex(8)}"
        xdir.mkdir(mode=0o700, parents=True)
        self.mref = referee
        self._ask_referee(RefereeInit(
            op="init", init_seed=self.init_seed, probe_seed=_seed(), xdir=str(xdir),
            matched=self._matched_settings()), referee)
        self.ev.flags.append(Flag("reference_matched_apart", "the matched reference ran in a "
                                  "referee process of its own, under the candidate's settings "
                                  "from its start: cuDNN keeps the plans it chose before "
                                  "cudnn.benchmark was turned on", "info"))

    def _matched_settings(self) -> MatchedSettings:
        return {"settings": self.ev.settings_changed,
                "autocast": self.ev.precision.get("autocast")}

    def timing(self, matched: bool) -> None:
        job, calls = self.job, 0
        if matched and self.mref is None:
            self._ask_referee({"op": "matched", **self._matched_settings()})
        self._round(max(1, min(job.warmup, BURST)), matched, keep=False)
        started = time.monotonic()
        while calls < job.max_samples:
            self._round(min(BURST, job.max_samples - calls), matched, keep=True)
            calls += len(self.ev.candidate[-1].times_ms)
            self._progress("timing", calls, job.max_samples)
            if self.ev.recheck.mismatches:
                break
            elapsed = time.monotonic() - started
            if calls >= job.min_samples and (self._stable() or elapsed > job.timing_budget_s):
                break
        self.ev.timed = True

    def _stable(self) -> bool:
        sides = [self.ev.reference, self.ev.candidate] + ([self.ev.matched] if self.ev.matched
                                                          else [])
        return all(len(s) >= MIN_BURSTS and
                   median_rel_ci([b.mean_ms() for b in s]) <= self.job.stable_rel_ci
                   for s in sides)

    def _round(self, size: int, matched: bool, keep: bool) -> None:
        ids, slots = self._new_sets(size, 1)
        names = [f"{i}/0" for i in ids]
        order = ["reference", "candidate"] + (["matched"] if matched else [])
        self._rng.shuffle(order)
        bursts: dict[str, Burst] = {}
        for side in order:
            if side == "candidate":
                self._map(names, slots)
                reply, wall_ms = self._ask_worker({"op": "burst", "names": names})
                self._ask_referee({"op": "seal", "slots": names})
                judged = self._unmap()  # after the seal: writes into buffers come too late
                bursts[side] = Burst(read_times(reply.get("times_ms"), size), wall_ms)
                self._output_flags(read_metas(judged.get("outputs"), size))
                self.ev.late += read_int(reply.get("late"))
            else:
                bursts[side] = self._reference_burst(ids, "strict" if side == "reference"
                                                     else "matched")
        results = self._check(names)
        self._release(ids)
        self._mutation_flags(results)
        self._recheck(results)
        if keep:
            self.ev.reference.append(bursts["reference"])
            self.ev.candidate.append(bursts["candidate"])
            if matched:
                self.ev.matched.append(bursts["matched"])

    def _map(self, names: list[str], slots: dict[str, SlotDesc]) -> None:
        """The worker maps the burst's tensors first; that hand-off is bounded, not timed."""
        count = sum(len(slots[n]["inputs"]) + len(slots[n]["outputs"]) for n in names)
        self._handoff({"op": "map", "slots": {n: slots[n] for n in names}}, count,
                      "mapping", "before")
        self._mapped = count

    def _unmap(self) -> Reply:
        """After the seal, the worker describes and checks the burst's outputs and releases
        its tensors, bounded, not timed: closing CUDA IPC handles inside the burst read as
        the candidate's hidden work."""
        return self._handoff({"op": "unmap"}, self._mapped, "releasing", "after")

    def _handoff(self, message: Mapping[str, object], count: int, doing: str,
                 when: str) -> Reply:
        reply, wall_ms = self._ask_worker(message)
        limit_ms = MAP_FLOOR_MS + MAP_PER_TENSOR_MS * count
        if wall_ms > limit_ms:
            self.ev.slow_maps += 1
            if self.ev.slow_maps > 1:  # once is a hiccup of a loaded host
                self.ev.flags.append(Flag("timing_unaccounted", f"{doing} {count} shared "
                                          f"tensors took {wall_ms:.0f} ms (allowed "
                                          f"{limit_ms:.0f} ms): work hidden in the untimed "
                                          f"hand-off {when} a burst"))
        return reply

    def _recheck(self, results: list[CheckResult]) -> None:
        rc = self.ev.recheck
        for r in results:
            rc.compared += 1
            if not r.get("ok"):
                rc.mismatches += 1
                rc.detail = rc.detail or f"timed call {rc.compared}: {r.get('message')}"

    def finish(self) -> None:
        for running in self.children():
            _signal(running, signal.SIGCONT)
            with contextlib.suppress(PeerGone):
                running.peer.send({"op": "finish"})




def output_message(metas: list[OutputMeta], info: RefereeInfo) -> str:
    """A plain message for an output of the wrong kind, dtype or shape (as the worker saw it)."""
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


def spawn(mode: str, job: Job, limits: sandbox.Limits, text: str) -> Running:
    child = warm.take(mode, job.device, limits, text, job.build_dir)
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


def job_dir(running: Running) -> Path:
    return running.child.root
