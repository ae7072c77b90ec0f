"""Other work on the timing GPU, seen by the trusted parent through NVML (torch-free).

A timed window measures wall time, so any kernel of another process on the card (a model
server generating, another program) slows whichever side it lands on. The driver keeps
per-process utilization samples (``nvmlDeviceGetProcessUtilization``); the parent reads
them after each timed round and counts a process as *other* when it is none of this
evaluation's (the parent, and every process of its children's namespaces). A round with
other work in it is timed again (``conduct``), and a result timed beside other work anyway is
flagged ``gpu_shared``.

The candidate cannot hide its own work this way (its processes are ours), and it gains
nothing by being counted as "other": a round with other work is dropped, never credited.

Attribution needs the driver's pids to be the parent's: in a container with its own PID
namespace they may not be. ``open_watch`` checks it on the referee, which holds a CUDA
context by then; when the referee's pid is not among the card's compute processes the watch
is off and the evaluation says so (``GpuWatch.why_off``).
"""

from __future__ import annotations

import ctypes
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from cudal1_evaluator.schema import Flag

NVML_SUCCESS, NVML_ERROR_NOT_FOUND, NVML_ERROR_INSUFFICIENT_SIZE = 0, 6, 7
MAX_PROCESSES = 256
SAMPLES_FIRST, SAMPLES_MOST = 512, 16384  # process samples read at once (one per process and
# sampling period since the mark)
# The driver keeps one sample per live process, its SM share over the last sampling period,
# stamped when taken: ``settle`` waits this long so that what just ran has been sampled.
SAMPLE_PERIOD_US = 200_000
OTHER_SM_PERCENT = 5  # another process this busy in a span makes it timed again


class _ProcessSample(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("timeStamp", ctypes.c_ulonglong),
                ("smUtil", ctypes.c_uint), ("memUtil", ctypes.c_uint),
                ("encUtil", ctypes.c_uint), ("decUtil", ctypes.c_uint)]


class _ProcessInfo(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong),
                ("gpuInstanceId", ctypes.c_uint), ("computeInstanceId", ctypes.c_uint)]


_lib: ctypes.CDLL | None = None
_lib_lock = threading.Lock()


def _nvml() -> ctypes.CDLL | None:
    """libnvidia-ml, initialised once; None where there is no NVIDIA driver."""
    global _lib
    with _lib_lock:
        if _lib is None:
            try:
                lib = ctypes.CDLL("libnvidia-ml.so.1")
                if lib.nvmlInit_v2() != NVML_SUCCESS:
                    return None
            except (OSError, AttributeError):
                return None
            _lib = lib
        return _lib


def now_us() -> int:
    """NVML's clock: the samples' time stamps are the host's wall clock in microseconds."""
    return time.time_ns() // 1000


@dataclass(frozen=True)
class Other:
    """Another process's kernels on the card since a mark: its pid and top SM share (%)."""

    pid: int
    sm_percent: int


class GpuWatch:
    def __init__(self, lib: ctypes.CDLL | None, handle: ctypes.c_void_p | None,
                 why_off: str = "") -> None:
        self._lib, self._handle, self.why_off = lib, handle, why_off

    @property
    def on(self) -> bool:
        return self._handle is not None

    def compute_pids(self) -> set[int] | None:
        """The pids holding a compute context on the card; None when NVML cannot say."""
        if self._lib is None or self._handle is None:
            return None
        count = ctypes.c_uint(MAX_PROCESSES)
        infos = (_ProcessInfo * MAX_PROCESSES)()
        fn = getattr(self._lib, "nvmlDeviceGetComputeRunningProcesses_v3", None)
        if fn is None or fn(self._handle, ctypes.byref(count), infos) != NVML_SUCCESS:
            return None
        return {infos[i].pid for i in range(count.value)}

    def busy_since(self, start_us: int, least: int = 1) -> list[Other]:
        """Processes with a sample stamped after ``start_us`` whose SM share is at least
        ``least`` %. One sample per live process, its latest: a process busy now, or busy in
        the last period before it went quiet (conservative: it may have run after the span
        the caller asks about, never less)."""
        if self._lib is None or self._handle is None:
            return []
        top: dict[int, int] = {}
        for sample in self._samples(start_us):
            if sample.timeStamp >= start_us and sample.smUtil >= least:
                top[sample.pid] = max(top.get(sample.pid, 0), int(sample.smUtil))
        return [Other(pid, share) for pid, share in sorted(top.items())]

    def others_during(self, start_us: int, ours: Callable[[], Iterable[int]]) -> list[Other]:
        """Processes other than ``ours`` that used the card since ``start_us`` (at least
        ``OTHER_SM_PERCENT`` of the SMs); NVML is read before ``ours`` is known, so a process
        that starts meanwhile counts as other (a span timed again, never one missed)."""
        busy = self.busy_since(start_us, OTHER_SM_PERCENT)
        mine = set(ours()) if busy else set()
        return [o for o in busy if o.pid not in mine]

    def _samples(self, mark_us: int) -> list[_ProcessSample]:
        """The driver's samples since ``mark_us``, read into a buffer sized up front (the
        NULL-buffer sizing call is unreliable on some drivers), grown when it is too small."""
        assert self._lib is not None
        fn, size = self._lib.nvmlDeviceGetProcessUtilization, SAMPLES_FIRST
        while size <= SAMPLES_MOST:
            count = ctypes.c_uint(size)
            buffer = (_ProcessSample * size)()
            code = fn(self._handle, buffer, ctypes.byref(count), ctypes.c_ulonglong(mark_us))
            if code == NVML_SUCCESS:
                return list(buffer[:min(count.value, size)])
            if code != NVML_ERROR_INSUFFICIENT_SIZE:
                return []  # NOT_FOUND: no sample since the mark (others: ``open_watch``)
            size = max(2 * size, count.value + 16)
        return []


def open_watch(uuid: str, referee_pids: Iterable[int]) -> GpuWatch:
    """The watch of the card ``uuid`` (torch's spelling, no ``GPU-`` prefix), on only when
    NVML lists one of the referee's pids among the card's compute processes (so the pids it
    reports are the parent's)."""
    lib = _nvml()
    if lib is None:
        return GpuWatch(None, None, "no NVML (libnvidia-ml) in this process")
    if not uuid:
        return GpuWatch(None, None, "the referee did not report the GPU's UUID")
    handle = ctypes.c_void_p()
    name = uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"
    if lib.nvmlDeviceGetHandleByUUID(name.encode(), ctypes.byref(handle)) != NVML_SUCCESS:
        return GpuWatch(None, None, f"NVML does not know the GPU {name}")
    watch = GpuWatch(lib, handle)
    listed = watch.compute_pids()
    if listed is None:
        return GpuWatch(None, None, "NVML lists no compute processes for this GPU")
    if not listed & set(referee_pids):
        return GpuWatch(None, None, "NVML's pids are not this process's (a PID namespace "
                                    "between them): other processes' work is not attributed")
    code = lib.nvmlDeviceGetProcessUtilization(handle, (_ProcessSample * 1)(),
                                               ctypes.byref(ctypes.c_uint(1)),
                                               ctypes.c_ulonglong(0))
    if code not in (NVML_SUCCESS, NVML_ERROR_NOT_FOUND, NVML_ERROR_INSUFFICIENT_SIZE):
        return GpuWatch(None, None, f"NVML gives no per-process samples here (error {code}: "
                                    "a MIG instance?)")
    return watch


MAX_DROPPED = 8  # rounds timed again because other work overlapped them, at most


@dataclass
class SharedRounds:
    """The timed spans other processes' kernels overlapped: dropped and timed again, up to
    ``MAX_DROPPED``; past that kept, and the result flagged ``gpu_shared``."""

    watch: GpuWatch
    ours: Callable[[], set[int]]  # read after NVML, each time
    dropped: int = 0
    kept_anyway: int = 0
    seen: dict[int, int] = field(default_factory=dict)  # pid -> its top SM share (%)

    def overlapped(self, start_us: int) -> bool:
        """Whether another process used the card since ``start_us`` (read now)."""
        if not self.watch.on:
            return False
        others = self.watch.others_during(start_us, self.ours)
        for other in others:
            self.seen[other.pid] = max(self.seen.get(other.pid, 0), other.sm_percent)
        return bool(others)

    def drop(self) -> bool:
        """Whether an overlapped span may be dropped and timed again."""
        if self.dropped < MAX_DROPPED:
            self.dropped += 1
            return True
        self.kept_anyway += 1
        return False

    def settle(self, periods: int = 1) -> None:
        """Wait until the samples covering what just ran have been taken (``periods`` sample
        periods)."""
        if self.watch.on:
            time.sleep(periods * SAMPLE_PERIOD_US / 1e6)

    def flags(self) -> list[Flag]:
        who = ", ".join(f"pid {pid} (up to {share} % of the SMs)"
                        for pid, share in sorted(self.seen.items()))
        found = []
        if self.kept_anyway:
            found.append(Flag("gpu_shared", f"other processes ran kernels on this GPU during "
                              f"{self.kept_anyway} timed round(s) that were kept ({who}): those "
                              "times include their work; time again on a quiet GPU", "warn"))
        if self.dropped:
            found.append(Flag("gpu_shared_retimed", f"{self.dropped} timed round(s) overlapped "
                              f"other processes' kernels on this GPU ({who}) and were timed "
                              "again", "info"))
        if self.watch.why_off:
            found.append(Flag("gpu_watch_off", "other work on the GPU is not watched: "
                              f"{self.watch.why_off}", "info"))
        return found
