"""Isolation for evaluator subprocesses (stdlib only, no torch).

The parent (the app's lane process ``python -m cudal1_evaluator lane``, or
``python -m cudal1_evaluator run``) never runs candidate
code. It spawns ``python -m cudal1_evaluator _child MODE JOB.json`` in a new session
with a scrubbed environment, a private home/temp dir and resource limits, reads
the verdict from a pipe the candidate does not know, and kills the whole process
group on timeout, cancel or memory overrun.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import select
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from cudal1_evaluator.isolation import (
    cgroup,
    confine,
    gpu_view,
    lifetime,
    namespaces,
    pidtree,
    startup_check,
)
from cudal1_evaluator.isolation.child_env import scrub_env
from cudal1_evaluator.isolation.sandbox_layers import (
    host_allocator_env,
    job_device,
    layers_for_root,
    namespace_plan,
    on_cuda,
    outer_sandbox,
    runs_as,
    sandbox_dirs,
)
from cudal1_evaluator.parent import diskcap, window_gate
from cudal1_evaluator.wire import channel

ProgressFn = Callable[[str, int, int, str], None]
WARM_IDLE_S = 900.0  # an unused warm child exits after this long
READY_NAME = "ready"  # a warm child's file beside its job's: imports and warm-up done
INIT_ANSWER_S = 10.0  # the namespace's init answers a stop at once (here: the child's start)

@dataclass
class Limits:
    """Resource limits the child applies to itself before anything else runs."""

    memory_mb: int | None = None
    address_space: bool = True  # RLIMIT_AS breaks CUDA's address reservations: off on CUDA
    cpu_s: int | None = None
    nofile: int = 4096
    fsize_mb: int = 4096
    disk_mb: int = 4096  # all files together (temp, home, build growth): see diskcap

    def to_arg(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_arg(cls, text: str) -> Limits:
        return cls(**json.loads(text))


def _set(which: int, value: int) -> None:
    _, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(which, (value, value))


def apply_limits(limits: Limits) -> None:
    """Called by the child first thing (a ``preexec_fn`` is unsafe in a threaded parent)."""
    _set(resource.RLIMIT_CORE, 0)
    _set(resource.RLIMIT_NOFILE, limits.nofile)
    _set(resource.RLIMIT_FSIZE, limits.fsize_mb * 1024 * 1024)
    if limits.cpu_s:
        _set(resource.RLIMIT_CPU, limits.cpu_s)
    if limits.memory_mb and limits.address_space:
        _set(resource.RLIMIT_AS, limits.memory_mb * 1024 * 1024)


@dataclass
class Outcome:
    """What happened to one child process."""

    returncode: int | None = None
    signal_name: str = ""
    timed_out: bool = False
    cancelled: bool = False
    memory_exceeded: bool = False
    payload: dict[str, Any] | None = None
    channel_problem: str = ""
    stdout_tail: str = ""
    stderr_tail: str = ""
    last_stage: str = ""
    wall_s: float = 0.0
    disk_exceeded: str = ""  # why the disk watch killed the child (diskcap.DiskWatch.over)


def signal_name(returncode: int | None) -> str:
    if returncode is None or returncode >= 0:
        return ""
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def _rss_mb(pid: int) -> float:
    try:
        pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return 0.0
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def _tail(path: Path, limit: int = 8000) -> str:
    """The end of a log in the child's dir. The dir is the child's: the name may have been
    swapped for a link to a file only the parent may read, so no link is followed and only a
    regular file of one name is read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        with os.fdopen(fd, "rb") as fh:
            info = os.fstat(fh.fileno())
            if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:  # nor a hard link
                return ""
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - limit))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


PROGRESS_LINE_MOST = 64 << 10  # a progress line read at most this long at a time


def _drain(fd: int, sink: bytearray, limit: int, gate_of: Callable[[], window_gate.Gate]
           ) -> None:
    with os.fdopen(fd, "rb", buffering=0) as fh:
        while chunk := fh.read(65536):
            gate_of().between_windows()  # what a child wrote costs no timed window
            if len(sink) < limit:
                sink.extend(chunk)


class _ProgressReader:
    def __init__(self, fd: int, on_progress: ProgressFn | None,
                 gate_of: Callable[[], window_gate.Gate]) -> None:
        self.last_stage = ""
        self._fd, self._on, self._gate_of = fd, on_progress, gate_of
        self.thread = threading.Thread(target=self._loop, daemon=True, name="eval-progress")

    def _loop(self) -> None:
        with os.fdopen(self._fd, "rb") as fh:
            while line := fh.readline(PROGRESS_LINE_MOST):  # a longer line: parts, ignored
                self._gate_of().between_windows()  # what a child wrote costs no timed window
                event = channel.parse_progress(line)
                if event is None:
                    continue
                self.last_stage = event[0]
                if self._on is not None:
                    with contextlib.suppress(Exception):
                        self._on(*event)


def _kill_group(pgid: int) -> None:
    pidtree.kill(pgid)  # first, while the outer process still names it: the whole namespace
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    lifetime.kill_session(pgid)  # compilers that ninja moved to groups of their own


class Child:
    """One isolated child: ``python -m cudal1_evaluator _child MODE job.json`` in a new session.

    With ``job_text`` the job file is written before the process starts. Without it the child
    starts *warm*: it imports torch and the evaluator (and initialises CUDA for a CUDA device),
    then waits on a pipe, having seen no job and no candidate; ``run(job_text)`` writes the job
    and releases it, which saves the interpreter and torch start-up on the critical path. A warm
    child that is never used exits when its pipe closes, its parent dies, or after
    ``WARM_IDLE_S``.
    """

    def __init__(self, mode: str, limits: Limits, *, job_text: str | None = None,
                 warm_device: str = "", talk: bool = False,
                 writable: Sequence[str] = (), watch_warm_up: bool = True) -> None:
        self.mode, self.limits = mode, limits
        self._watch_warm_up = watch_warm_up  # a warm runner's dtype watch used once before a job
        self.gate = window_gate.OPEN  # the timing evaluation's, once a conductor takes it
        # talk: a socket for the parent's request/reply protocol (cudal1_evaluator.wire.talk)
        self.talk: socket.socket | None = None
        self._talk_wanted = talk
        self.root = lifetime.make_owned_temp_dir()  # swept at a later start if we die
        # where the referee puts the host tensors this child shares with it (talking children)
        shared = lifetime.exchange_base() if talk else None
        self.exchange = self.root / "tmp" if shared is None else \
            lifetime.make_owned_temp_dir(shared)
        self._go_w: int | None = None
        self._work_pid: int | None = None  # for memory readings only (see _worker_pid)
        self._ctl_w: int | None = None  # orders to the namespace's init, and its answers
        self._ack_r: int | None = None
        self._init_lock = threading.Lock()  # one order and its answer at a time
        self._own_dirs = (str(self.exchange),) if shared is not None else ()  # outside root
        self._warm_device = warm_device
        self._view: gpu_view.GpuView | None = None  # its one GPU, on a host of several
        self._extra_writable = (*self._own_dirs, *writable)
        self.group: cgroup.Group | None = None  # its cgroup, when one could be made
        self._over_limit = False  # its group could not be held to the job's memory limit
        try:
            self._start(job_text, warm_device)
        except BaseException:
            self._remove_dirs()
            raise

    def _view_gpu(self, plan: dict[str, list[str]], job_text: str | None,
                  warm_device: str) -> dict[str, str]:
        """On a host of several GPUs, a CUDA child sees its job's GPU alone
        (``isolation.gpu_view``): the other GPUs' nodes go in its plan, and its environment
        names its GPU. Returns the environment to add."""
        if not on_cuda(job_text, warm_device):
            return {}
        view, why = gpu_view.view_for(job_device(job_text) or warm_device)
        if view is None:
            if why:
                plan["gpu_why"] = [why]
            return {}
        self._view = view
        plan["gpu_nodes"], plan["gpu_view"] = list(view.covered), [view.describe()]
        return view.env()

    def _job_inside(self, job_text: str) -> str:
        return gpu_view.job_inside(job_text) if self._view is not None else job_text

    def _remove_dirs(self) -> None:
        if self.group is not None:
            self.group.remove()
        lifetime.remove_tree(self.root)
        lifetime.remove_tree(self.exchange)

    def _start(self, job_text: str | None, warm_device: str) -> None:
        home, tmp = self.root / "home", self.root / "tmp"
        home.mkdir(exist_ok=True)
        tmp.mkdir(exist_ok=True)
        self.job_path = self.root / "job.json"
        self.job_text = job_text
        env = {**scrub_env(dict(os.environ), home=home, tmpdir=tmp),
               **host_allocator_env(job_text, warm_device)}
        self.writable = sandbox_dirs(self.root, job_text, self._extra_writable, self.mode)
        prefix, layers = outer_sandbox(self.writable)
        layers = layers_for_root(layers, self.mode, job_text, warm_device)
        private = [os.path.realpath(p) for p in (self.root, *self._own_dirs)]
        plan = namespace_plan(self.mode, job_text, self.writable, private, layers, warm_device)
        if plan is not None:
            env.update(self._view_gpu(plan, job_text, warm_device))
        if job_text is not None:
            _write_job(self.job_path, self._job_inside(job_text))
        self._hand_dirs(runs_as(layers), plan)
        group_why = self._make_group(plan is not None, warm=job_text is None)
        if plan is not None and self.group is not None:
            plan["cgroupns"] = ["own"]  # rooted at the group it joins first
        control: list[int] = []
        if plan is not None:  # the namespace's init takes its stop and go orders here
            ctl_r, self._ctl_w = os.pipe()
            self._ack_r, ack_w = os.pipe()
            control = [ctl_r, ack_w]
            plan["control"] = [str(fd) for fd in control]
        startup_check.write_config(
            self.root, writable=self.writable, private=private, layers=layers,
            python_path=env.get("PYTHONPATH", ""), namespace=plan,
            fixed_size=[os.path.realpath(p) for p in self._own_dirs],
            cgroup={"procs": self.group.procs_files if self.group else [], "why": group_why,
                    "tasks": self.group is not None and
                    self.group.tasks_limit() == confine.TASKS_A_CHILD})
        self.key = channel.new_key()
        self._result_r, result_w = os.pipe()
        self._progress_r, progress_w = os.pipe()
        key_r, key_w = os.pipe()
        os.write(key_w, self.key)
        os.close(key_w)
        child_fds = [result_w, progress_w, key_r, *control]
        argv = [
            *prefix, sys.executable, "-S", "-m", "cudal1_evaluator", "_child", self.mode,
            str(self.job_path),
            "--result-fd", str(result_w), "--progress-fd", str(progress_w),
            "--key-fd", str(key_r), "--limits", self.limits.to_arg(),
        ]
        if self._talk_wanted:
            self.talk, theirs = socket.socketpair()
            child_fds.append(theirs.detach())
            argv += ["--talk-fd", str(child_fds[-1])]
        if job_text is None:
            go_r, self._go_w = os.pipe()
            child_fds.append(go_r)
            # the job's own limits come with the go line; until then only the fixed ones hold
            argv[argv.index("--limits") + 1] = replace(self.limits, memory_mb=None,
                                                       cpu_s=None).to_arg()
            argv += ["--wait-fd", str(go_r), "--warm-device",
                     "cuda:0" if self._view is not None else warm_device,
                     *([] if self._watch_warm_up else ["--no-watch-warm-up"])]
        self.out_path, self.err_path = self.root / "stdout.log", self.root / "stderr.log"
        with self.out_path.open("wb") as out, self.err_path.open("wb") as err:
            try:
                self.proc = subprocess.Popen(
                    argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, cwd=tmp,
                    env={**env, **lifetime.child_env()},  # the child dies with this process
                    pass_fds=(*child_fds, lifetime.watchdog_fd()), start_new_session=True,
                )
            finally:
                for fd in child_fds:
                    os.close(fd)
        if self.group is not None:  # the child joins it itself; this covers a read-only /sys
            self.group.add(self.proc.pid)

    def _make_group(self, candidate: bool, *, warm: bool) -> str:
        """A candidate-mode child's own cgroup (``isolation.cgroup``); "" or why there is none.
        A warm child's memory limit comes with its job."""
        if not candidate:
            return ""
        self.group, why = cgroup.Group.make(self.root.name)
        if self.group is not None and not self.group.limit(
                None if warm else self.limits.memory_mb, confine.TASKS_A_CHILD):
            self.group.remove()  # a group that does not hold the limit is not claimed
            self.group, why = None, "the cgroup's memory limit did not hold"
        return why

    def alive(self) -> bool:
        return self.proc.poll() is None

    def ready(self) -> bool:
        """A warm child has finished its imports and warm-up and waits for its job (written
        by our own code before any job: no candidate has run in it yet)."""
        return (self.root / READY_NAME).exists()

    def stderr_tail(self, limit: int = 2000) -> str:
        return _tail(self.err_path, limit)

    def members(self) -> list[int]:
        """Host pids of every process in the child's PID namespace (empty without one)."""
        return pidtree.members(self.proc.pid)

    def cpu_ns(self) -> pidtree.CpuReading:
        """CPU time every process the child started has run (ns: threads and processes that
        ended included; the namespace's init's own time left out, it only obeys the parent,
        but not what the children it reaped ran), and whether all of them are stopped now."""
        init = pidtree.namespace_init(self.proc.pid)
        pids = pidtree.descendants(init) if init is not None else self.members()
        return pidtree.cpu_ns(pids or [self.proc.pid], reaper=init)

    def last_pid(self) -> int | None:
        """The last PID given out in the child's namespace, as its init reads it (None without
        an init to ask): a task created between two readings moves it, even one that ended
        and was reaped before the second (``SIGCHLD`` ignored: its CPU time is on no clock)."""
        answer = self._ask_init(namespaces.LAST_PID, namespaces.LAST_PID_BYTES)
        if answer is None:
            return None
        value = int.from_bytes(answer, "little", signed=True)
        return value if value >= 0 else None

    def signal_all(self, sig: int) -> None:
        """``sig`` to every process the child started, ``setsid`` escapees included: through
        its namespace's init (atomic, no fork slips past), else by a scan of its namespace,
        else its process group alone."""
        if not self._by_init(sig):
            pidtree.signal_all(self.proc.pid, sig)

    def _by_init(self, sig: int) -> bool:
        """Ask the namespace's init to stop or resume every member; False when there is no
        init to ask (no namespace, or it never answered: then never again)."""
        command = {signal.SIGSTOP: b"S", signal.SIGCONT: b"C"}.get(signal.Signals(sig))
        return command is not None and self._ask_init(command, 1) is not None

    def _ask_init(self, command: bytes, size: int) -> bytes | None:
        """One order to the namespace's init and its answer of ``size`` bytes; None when there
        is no init to ask, or it did not answer in time (then it is never asked again)."""
        with self._init_lock:
            ctl, ack = self._ctl_w, self._ack_r
            if ctl is None or ack is None or not self.alive():
                return None
            answer = b""
            try:
                os.write(ctl, command)
                deadline = time.monotonic() + INIT_ANSWER_S
                while len(answer) < size:
                    left = deadline - time.monotonic()
                    if left <= 0 or not select.select([ack], [], [], left)[0]:
                        break
                    got = os.read(ack, size - len(answer))
                    if not got:
                        break
                    answer += got
            except OSError:
                pass
            if len(answer) == size:
                return answer
            self._close_control()
            return None

    def _close_control(self) -> None:
        for fd in (self._ctl_w, self._ack_r):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._ctl_w = self._ack_r = None

    def _over_memory(self) -> bool:
        """The kernel killed in the child's cgroup for want of memory, or (CUDA, where no
        address-space limit holds) its work process is resident past the limit."""
        if self._over_limit or (self.group is not None and self.group.oom_kills()):
            return True
        memory = None if self.limits.address_space else self.limits.memory_mb
        return bool(memory) and _rss_mb(self._worker_pid()) > (memory or 0)

    def _worker_pid(self) -> int:
        """The process doing the work: PID 2 of the child's namespace (its init only relays
        stops: a fresh-eyes round found the memory watch reading the init's), else the
        child."""
        if self._work_pid is None:
            worker = pidtree.namespace_worker(self.proc.pid)  # None until the init forks
            if worker != self.proc.pid:  # the child itself: no namespace (yet)
                self._work_pid = worker
        return self._work_pid or self.proc.pid

    def _hand_dirs(self, owner: int, plan: dict[str, list[str]] | None) -> None:
        """A candidate-mode child started as root writes only where it owns (no capabilities,
        or uid ``nobody``): its dirs are handed to the uid it runs as before it starts, whole
        (an earlier child may have run as another: CPU and GPU jobs share a build cache), so
        what the referee makes in them later can be given to their owner. A served cache's
        root is not: its per-source dir is handed over when it is bound."""
        if owner < 0 or plan is None:
            return
        served = {os.path.realpath(p) for p in plan.get("serve", [])}
        for path in self.writable:
            if os.path.realpath(path) not in served:
                lifetime.give_dir(Path(path), owner)

    def run(self, job_text: str | None, timeout_s: float, *, limits: Limits | None = None,
            cancel: threading.Event | None = None, on_progress: ProgressFn | None = None,
            result_limit: int = 64 * 2**20) -> Outcome:
        """Release the child (writing the job first, and sending ``limits``, when it started
        warm) and wait for it."""
        try:
            if self._go_w is not None:
                self.limits = limits or self.limits
                self.job_text = job_text or ""
                _write_job(self.job_path, self._job_inside(self.job_text))
                go, self._go_w = self._go_w, None
                if self.group is not None and not self.group.limit(self.limits.memory_mb, None):
                    self._over_limit = True  # already past the job's limit (v1 refuses it):
                if not self._over_limit:  # never released, it is killed as out of memory
                    with contextlib.suppress(OSError):
                        os.write(go, self.limits.to_arg().encode() + b"\n")
                os.close(go)
            return self._wait_for(timeout_s, cancel, on_progress, result_limit)
        finally:
            self._close_control()
            self._remove_dirs()

    def covers(self, job_text: str | None) -> bool:
        """Does this warm child's sandbox let it write where the job builds?"""
        return all(any(d == w or d.startswith(w + os.sep) for w in self.writable)
                   for d in sandbox_dirs(self.root, job_text, self._extra_writable, self.mode))

    def _kill(self) -> None:
        if self._go_w is not None:
            os.close(self._go_w)
        _kill_group(self.proc.pid)
        self.proc.wait()
        if self.talk is not None:
            self.talk.close()
        self._close_control()
        for fd in (self._result_r, self._progress_r):
            with contextlib.suppress(OSError):
                os.close(fd)

    def discard(self) -> None:
        """Kill an unused (warm) child and clean up."""
        self._kill()
        self._go_w = None
        self._remove_dirs()

    def _wait_for(self, timeout_s: float, cancel: threading.Event | None,
                  on_progress: ProgressFn | None, result_limit: int) -> Outcome:
        proc, started = self.proc, time.monotonic()
        data = bytearray()
        def gate_of() -> window_gate.Gate:
            return self.gate  # set once an evaluation's conductor takes this child

        reader = threading.Thread(
            target=_drain, args=(self._result_r, data, result_limit, gate_of), daemon=True
        )
        reader.start()
        progress = _ProgressReader(self._progress_r, on_progress, gate_of)
        progress.thread.start()
        disk = diskcap.DiskWatch([self.root], _build_root(self.job_text),
                                 self.limits.disk_mb, gate_of).start(proc.pid)
        outcome = _wait(proc, timeout_s, cancel, self._over_memory)
        outcome.memory_exceeded |= self.group is not None and self.group.oom_kills() > 0
        disk.stop()
        outcome.disk_exceeded = disk.exceeded
        _kill_group(proc.pid)  # stray grandchildren (ninja, threads' forks) go too
        proc.wait()
        reader.join(timeout=10)
        progress.thread.join(timeout=2)
        outcome.wall_s = time.monotonic() - started
        outcome.returncode = proc.returncode
        outcome.signal_name = "" if outcome.timed_out else signal_name(proc.returncode)
        outcome.payload, outcome.channel_problem = channel.read_verdict(bytes(data), self.key)
        outcome.stdout_tail, outcome.stderr_tail = _tail(self.out_path), _tail(self.err_path)
        outcome.last_stage = progress.last_stage
        return outcome


def _build_root(job_text: str | None) -> list[Path]:
    """The job's shared build cache, whose growth counts toward the child's disk use; read from
    the job the parent holds, never from the file the child may rewrite."""
    try:
        root = json.loads(job_text or "{}").get("build_dir")
    except (ValueError, AttributeError):
        return []
    return [Path(root)] if isinstance(root, str) and root else []


def _write_job(path: Path, text: str) -> None:
    """The job file, readable by the child whatever uid it runs as (its dir is its own)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        os.fchmod(fh.fileno(), 0o644)
        fh.write(text)


def _wait(proc: subprocess.Popen[bytes], timeout_s: float, cancel: threading.Event | None,
          over_memory: Callable[[], bool]) -> Outcome:
    outcome = Outcome()
    deadline = time.monotonic() + timeout_s
    while proc.poll() is None:
        if cancel is not None and cancel.is_set():
            outcome.cancelled = True
        elif time.monotonic() > deadline:
            outcome.timed_out = True
        elif over_memory():
            outcome.memory_exceeded = True
        else:
            if cancel is not None:
                cancel.wait(0.05)
            else:
                time.sleep(0.05)
            continue
        _kill_group(proc.pid)
        break
    return outcome


@dataclass
class Spawn:
    """One isolated child run, started cold: ``python -m cudal1_evaluator _child MODE job.json``."""

    mode: str
    job_text: str
    timeout_s: float
    limits: Limits
    cancel: threading.Event | None = None
    on_progress: ProgressFn | None = None
    result_limit: int = 64 * 2**20

    def run(self) -> Outcome:
        child = Child(self.mode, self.limits, job_text=self.job_text)
        return child.run(self.job_text, self.timeout_s, cancel=self.cancel,
                         on_progress=self.on_progress, result_limit=self.result_limit)
