"""What many sessions share in one run: the timing lanes, the build threads, the judge.

``cudal1-tui run DIR --headless`` opens one engine per problem; they all queue their
candidates' builds on one ``BuildQueue`` (the CPU cores) and their evaluations on one set of
lanes: one per GPU of the host (``--gpus`` picks which), the CPU's one lane on a host without
a GPU, or a Ray cluster's GPUs (``--cluster``, or ``RAY_ADDRESS`` in the environment; see
``cudal1_tui.cluster``). Each problem's probe also holds a lane, so no reference is timed
beside an evaluation on the same GPU.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from cudal1_evaluator.schema import ProbeJob, ProbeResult
from cudal1_tui.engine.device import gpu_count, resolve_device
from cudal1_tui.engine.lanes import PROBE, Lanes, LaneUse, LocalLanes, OnWait
from cudal1_tui.engine.pool import BuildQueue, EvalPool
from cudal1_tui.errors import FleetError
from cudal1_tui.judging import JUDGE, Judge

LOCAL = "local"  # ``--cluster local``: this host even when RAY_ADDRESS is set
GPUS_FIX = "pass GPU indices as torch numbers them here, e.g. --gpus 0,1 (see `nvidia-smi`)"


@dataclass
class Fleet:
    lanes: Lanes
    judge: Judge
    device: str  # every session's device: ``cuda`` (lanes say which one) or ``cpu``
    label: str  # how the progress view names where evaluations run
    builds: BuildQueue = field(default_factory=BuildQueue)
    close_hook: Callable[[], None] | None = None
    _closed: threading.Event = field(default_factory=threading.Event)

    @property
    def width(self) -> int:
        return self.lanes.width

    def pool(self, holder: str) -> EvalPool:
        """A session's pool: its own evaluation threads, the fleet's lanes and builds."""
        return EvalPool(self.device, holder=holder, lanes=self.lanes, builds=self.builds)

    def probe(self, job: ProbeJob, holder: str, on_wait: OnWait | None = None) -> ProbeResult:
        """The problem's probe, holding a lane like an evaluation (on that lane's device)."""
        with self.lanes.hold(holder, on_wait, kind=PROBE) as lane:
            device = lane.device if lane is not None else job.device
            return self.judge.probe(dataclasses.replace(job, device=device))

    def usage(self) -> list[LaneUse]:
        return self.lanes.usage()

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        self.builds.shutdown(wait=True)
        if self.close_hook is not None:
            self.close_hook()


def parse_gpus(text: str) -> list[int]:
    """``0,1`` or ``0-3`` (or both: ``0,2-3``) as GPU indices, in order, without repeats."""
    out: list[int] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        first, _, last = part.partition("-")
        if not first.isdigit() or (last and not last.isdigit()):
            raise FleetError(f"--gpus: {part!r} is not a GPU index or a range", fix=GPUS_FIX)
        out.extend(range(int(first), int(last or first) + 1))
    if not out:
        raise FleetError("--gpus names no GPU", fix=GPUS_FIX)
    return list(dict.fromkeys(out))


def local_devices(device_setting: str, gpus: list[int] | None) -> tuple[str, list[str]]:
    """(the sessions' device, one lane device per GPU) on this host."""
    device = resolve_device(device_setting if gpus is None else "cuda")
    if device == "cpu":
        return "cpu", ["cpu"]
    if gpus is None and device != "cuda":
        return device, [device]  # ``--device cuda:1``: that GPU alone
    seen = gpu_count()
    if seen == 0:
        raise FleetError("--gpus: torch sees no CUDA GPU on this host",
                          fix="drop --gpus to run on the CPU, or install a CUDA build of torch")
    wanted = gpus if gpus is not None else list(range(seen))
    missing = [i for i in wanted if i >= seen]
    if missing:
        raise FleetError(f"--gpus: no GPU {', '.join(map(str, missing))} here (torch sees "
                          f"{seen}: 0-{seen - 1})", fix=GPUS_FIX)
    lanes = [f"cuda:{i}" for i in wanted]
    return ("cuda" if len(lanes) > 1 else lanes[0]), lanes


def local_fleet(device_setting: str, gpus: list[int] | None) -> Fleet:
    if gpus is not None and device_setting == "cpu":
        raise FleetError("--gpus with --device cpu: pick one", fix="drop one of the two")
    device, devices = local_devices(device_setting, gpus)
    label = "CPU (one lane)" if device == "cpu" else \
        f"{len(devices)} GPU lane(s): {', '.join(devices)}"
    return Fleet(LocalLanes(devices), JUDGE, device, label)


def cluster_address(flag: str | None, environ: dict[str, str] | None = None) -> str | None:
    """The Ray cluster to use: ``--cluster``, else ``RAY_ADDRESS``; None for this host."""
    env = os.environ if environ is None else environ
    chosen = flag if flag is not None else env.get("RAY_ADDRESS", "").strip() or None
    return None if chosen in (None, LOCAL) else chosen


def make_fleet(device_setting: str, gpus: list[int] | None, cluster: str | None) -> Fleet:
    """This host's lanes, or a Ray cluster's when an address is given (flag or env)."""
    address = cluster_address(cluster)
    if address is None:
        return local_fleet(device_setting, gpus)
    if gpus is not None:
        raise FleetError("--gpus picks GPUs of this host; on a Ray cluster Ray places "
                          "every evaluation", fix="drop --gpus, or pass --cluster local")
    from cudal1_tui.cluster.ray_backend import ray_fleet

    return ray_fleet(address, device_setting)
