"""The session's view of the GPU it shares with the model server.

``GpuShare`` knows the server's GPUs (``gpushare.server_gpus``), decides for each timing
lane whether it shares the card (setting ``wait_for_model``: ``auto`` when the server uses
the lane's GPU, ``always``, ``never``), keeps shared timings and generations apart through
the server's ``QuietGate``, writes each start and end to the session's event log, and checks
the free memory before an evaluation on a GPU (``gpushare.memory``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from cudal1_tui.engine.quiet_gate import QuietGate, gate_for
from cudal1_tui.gpushare import memory, smi
from cudal1_tui.gpushare.devices import physical_gpu
from cudal1_tui.gpushare.server_gpus import ServerGpus
from cudal1_tui.gpushare.smi import GpuRow, SmiRunner
from cudal1_tui.store.event_log import EventLog

ALWAYS, NEVER, AUTO = "always", "never", "auto"
Notify = Callable[[str], None]


def timing_waits(device: str) -> str:
    return f"timing waits: the model is generating on {device}"


def stream_waits(device: str) -> str:
    return f"generation waits: a candidate is being timed on {device}"


@dataclass
class GpuShare:
    server_url: str
    server: ServerGpus
    mode: str = AUTO  # wait_for_model
    log: EventLog | None = None
    need: memory.Need | None = None  # what an evaluation of the problem needs on a GPU
    margin_mib: int = 1024
    rows: list[GpuRow] | None = None  # nvidia-smi's GPUs, for CUDA_VISIBLE_DEVICES UUIDs
    run: SmiRunner = smi.run_smi
    gate: QuietGate = field(init=False)
    _shared_devices: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.gate = gate_for(self.server_url)

    def gpu_of(self, device: str) -> int | None:
        return physical_gpu(device, self.rows)

    def shares(self, device: str) -> bool:
        """Whether timing on ``device`` must wait for the model's generations."""
        if self.mode == NEVER:
            return False
        return self.mode == ALWAYS or self.server.uses(self.gpu_of(device))

    def note_lanes(self, devices: list[str]) -> None:
        """The lanes this session times on: generations wait only for timings on these."""
        with self._lock:
            self._shared_devices = {d for d in devices if self.shares(d)}

    # -- generations ---------------------------------------------------------------------

    @contextmanager
    def generating(self, round_: int, slot: int, notify: Notify,
                   cancel: threading.Event) -> Iterator[bool]:
        """Hold a generation's place; yields False when cancelled while a timing ran."""
        mark = self._marker(f"r{round_}s{slot}", round=round_, slot=slot)
        shown = self._shown_device()
        if not self.gate.begin_stream(mark, lambda: notify(stream_waits(shown)), cancel):
            yield False
            return
        try:
            yield True
        finally:
            self.gate.end_stream(mark)

    def _shown_device(self) -> str:
        with self._lock:
            return ", ".join(sorted(self._shared_devices)) or "the timing GPU"

    # -- timed evaluations ---------------------------------------------------------------

    @contextmanager
    def timing(self, record_id: str, device: str, notify: Notify,
               cancel: threading.Event) -> Iterator[bool]:
        """Hold the card for one evaluation on ``device``; yields False when cancelled."""
        mark = self._marker(record_id, device=device)
        if not self.shares(device):
            mark("timing_started")
            try:
                yield True
            finally:
                mark("timing_ended")
            return
        if not self.gate.begin_timing(mark, lambda: notify(timing_waits(device)), cancel):
            yield False
            return
        try:
            yield True
        finally:
            self.gate.end_timing(mark)

    def check_memory(self, device: str) -> None:
        """Raise ``GpuMemoryError`` when ``device`` (a GPU) has too little free memory."""
        gpu = self.gpu_of(device)
        if gpu is None or self.need is None:
            return
        free = smi.free_mib(gpu, self.run)
        if free is None:
            return  # no nvidia-smi: the evaluator's own out-of-memory report stands
        memory.check(free, self.need, self.margin_mib, gpu=gpu, server_kind=self.server.kind,
                     server_shares=self.server.uses(gpu))

    def _marker(self, id_: str, **fields: object) -> Callable[[str], None]:
        log = self.log

        def mark(event: str) -> None:
            if log is not None:
                log.write(event, id=id_, **fields)

        return mark


def unshared() -> GpuShare:
    """A share that never waits and logs nothing (before the session's own is set up)."""
    return GpuShare("", ServerGpus((), "not checked"), mode=NEVER)
