"""The session's ``GpuShare`` from its settings: detect the server's GPUs, say what follows.

Detection runs at opening and whenever the model's URL changes. It asks ``nvidia-smi`` only
where it matters: timing on a GPU with ``wait_for_model = "auto"``.
"""

from __future__ import annotations

from pathlib import Path

from cudal1_evaluator.schema import ProbeResult
from cudal1_tui.config import Settings
from cudal1_tui.engine.events import EngineError
from cudal1_tui.engine.gpu_share import ALWAYS, AUTO, GpuShare
from cudal1_tui.engine.lanes import Lanes, SlotLanes
from cudal1_tui.engine.workspace import Emit
from cudal1_tui.gpushare import listeners, memory, server_gpus, smi
from cudal1_tui.gpushare.devices import torch_index
from cudal1_tui.gpushare.memory import GpuMemoryError
from cudal1_tui.gpushare.server_gpus import ServerGpus
from cudal1_tui.gpushare.smi import SmiRunner
from cudal1_tui.store import naming
from cudal1_tui.store.event_log import EventLog


def _server(settings: Settings, devices: list[str], run: SmiRunner,
            root: Path) -> ServerGpus:
    on_gpu = any(torch_index(d) is not None for d in devices)
    if settings.wait_for_model != AUTO:
        return ServerGpus((), f"wait_for_model = {settings.wait_for_model}")
    if not devices:
        return ServerGpus((), "evaluations are placed by the cluster's scheduler")
    if not on_gpu:
        return ServerGpus((), "timing on the CPU")
    return server_gpus.detect(settings.base_url, settings.model_gpus, run=run, root=root)


def open_share(settings: Settings, session_path: Path, probe: ProbeResult | None,
               devices: list[str], *, run: SmiRunner = smi.run_smi,
               root: Path = listeners.PROC) -> GpuShare:
    """The share for a session timing on ``devices`` (its lanes)."""
    server = _server(settings, devices, run, root)
    on_gpu = any(torch_index(d) is not None for d in devices)
    log = EventLog(session_path / naming.EVENTS_FILE)
    share = GpuShare(settings.base_url, server, mode=settings.wait_for_model, log=log,
                     need=memory.estimate(probe) if probe is not None and on_gpu else None,
                     margin_mib=settings.gpu_memory_margin_mb,
                     rows=smi.gpus(run) if on_gpu else None, run=run)
    share.note_lanes(devices)
    log.write("server_gpus", gpus=list(server.gpus), how=server.how, kind=server.kind,
              pids=list(server.pids), mode=share.mode,
              shared=[d for d in devices if share.shares(d)])
    return share


def shared_note(share: GpuShare, devices: list[str]) -> str:
    """What the user is told when timing waits for the model ("" when it never does)."""
    shared = [d for d in devices if share.shares(d)]
    if not shared:
        return ""
    if share.mode == ALWAYS:
        return (f"wait_for_model = always: timed evaluations on {', '.join(shared)} wait "
                "while the model generates")
    gpus = ", ".join(str(g) for g in share.server.gpus)
    return (f"{share.server.name} uses GPU {gpus} ({share.server.how}), where candidates "
            f"are timed ({', '.join(shared)}): timed evaluations wait while it generates")


def share_for_lanes(settings: Settings, session_path: Path, probe: ProbeResult | None,
                    lanes: Lanes, emit: Emit) -> GpuShare:
    """The session's share, said to the user: an info line when timing waits for the model,
    an error now (before any round) when a GPU lacks the room an evaluation needs. A
    cluster's scheduler places evaluations on other hosts: nothing here is shared then."""
    devices = [] if isinstance(lanes, SlotLanes) else [use.device for use in lanes.usage()]
    share = open_share(settings, session_path, probe, devices)
    note = shared_note(share, devices)
    if note:
        emit(EngineError(note, "", 0, True, severity="info"))
    for device in devices:
        try:
            share.check_memory(device)
        except GpuMemoryError as exc:
            emit(EngineError(exc.message, exc.fix, 0, True))
    return share
