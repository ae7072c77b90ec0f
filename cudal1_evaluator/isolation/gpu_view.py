"""The one GPU a candidate's child may open, on a host of several (stdlib only).

A CUDA child would otherwise keep every ``/dev/nvidiaN`` node of the host: it could start work
on a GPU that nobody times or watches (work before its window, or work that slows another
lane's timing). A candidate-mode CUDA child gets a view of its job's GPU alone:

- every other GPU's node is covered, in the child's own mount namespace, by an empty file that
  nobody may open (``isolation.namespaces``), as a device cgroup denies a node (batch
  schedulers hide GPUs so, and CUDA leaves such a GPU out);
- ``CUDA_VISIBLE_DEVICES`` names its GPU by UUID, whatever order CUDA numbers GPUs in;
- its job's device becomes ``cuda:0``, the one GPU it sees (``job_inside``).

Which GPU ``cuda:N`` is comes from CUDA itself: a short process of the driver API alone
(``cuDeviceGetUuid``), under this process's environment, once per device and environment.
The node of that UUID comes from the driver's ``/proc/driver/nvidia/gpus/*/information``.
The referee, a trusted child, keeps every GPU and refuses an output that lies on another
(``wire.cuda_ipc.Mapper``).
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

PROC_GPUS = Path("/proc/driver/nvidia/gpus")
NVIDIA_MAJOR = 195  # the driver's char devices: /dev/nvidiaN is minor N, nvidiactl 255
_NODE = re.compile(r"nvidia(\d+)")
LAYER = "GPU view"

_UUID_OF_INDEX = r"""
import ctypes, sys
lib = ctypes.CDLL("libcuda.so.1")
def check(code, what):
    if code:
        sys.exit(f"{what} failed with CUDA error {code}")
check(lib.cuInit(0), "cuInit")
dev = ctypes.c_int()
check(lib.cuDeviceGet(ctypes.byref(dev), int(sys.argv[1])), "cuDeviceGet")
raw = (ctypes.c_ubyte * 16)()
get = getattr(lib, "cuDeviceGetUuid_v2", None) or lib.cuDeviceGetUuid
check(get(raw, dev), "cuDeviceGetUuid")
h = bytes(raw).hex()
print(f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}")
"""


@dataclass(frozen=True)
class GpuView:
    """A child's GPU: its UUID and node minor, and the other GPUs' nodes it may not open."""

    uuid: str
    minor: int
    covered: tuple[str, ...]

    def env(self) -> dict[str, str]:
        return {"CUDA_VISIBLE_DEVICES": self.uuid}

    def describe(self) -> str:
        return (f"only its GPU ({self.uuid}, /dev/nvidia{self.minor}): "
                f"{len(self.covered)} other GPU node(s) covered")


def gpu_nodes(dev: str = "/dev") -> dict[int, str]:
    """The host's GPU nodes (``/dev/nvidiaN``, the driver's char devices) by minor number."""
    found: dict[int, str] = {}
    try:
        names = os.listdir(dev)
    except OSError:
        return found
    for name in names:
        if not _NODE.fullmatch(name):
            continue
        path = os.path.join(dev, name)
        try:
            st = os.stat(path)
        except OSError:
            continue
        if stat.S_ISCHR(st.st_mode) and os.major(st.st_rdev) == NVIDIA_MAJOR:
            found[os.minor(st.st_rdev)] = path
    return found


def driver_minors(proc_gpus: Path = PROC_GPUS) -> dict[str, int]:
    """Each GPU's node minor by UUID, as the driver lists them."""
    found: dict[str, int] = {}
    try:
        entries = sorted(proc_gpus.iterdir())
    except OSError:
        return found
    for entry in entries:
        try:
            text = (entry / "information").read_text()
        except OSError:
            continue
        fields = dict(_field(line) for line in text.splitlines() if ":" in line)
        uuid, minor = normal_uuid(fields.get("GPU UUID", "")), fields.get("Device Minor", "")
        if uuid and minor.isdigit():
            found[uuid] = int(minor)
    return found


def normal_uuid(text: str) -> str:
    """A GPU UUID as nvidia-smi writes it (``GPU-`` and lower-case hex), "" if not one."""
    text = text.strip()
    return f"GPU-{text[4:].lower()}" if text[:4].upper() == "GPU-" and len(text) > 4 else ""


def _field(line: str) -> tuple[str, str]:
    key, _, value = line.partition(":")
    return key.strip(), value.strip()


UuidOf = Callable[[int, Mapping[str, str]], str]


def cuda_uuid(index: int, env: Mapping[str, str]) -> str:
    """The UUID of the GPU CUDA numbers ``index`` under ``env`` (raises RuntimeError)."""
    try:
        done = subprocess.run([sys.executable, "-S", "-c", _UUID_OF_INDEX, str(index)],
                              env=dict(env), capture_output=True, text=True, timeout=120,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RuntimeError(f"could not ask CUDA which GPU cuda:{index} is: {exc}") from None
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise RuntimeError(f"could not ask CUDA which GPU cuda:{index} is: {tail}")
    return normal_uuid(done.stdout)


_cache: dict[tuple[int, str, str], tuple[GpuView | None, str]] = {}


def view_for(device: str, *, env: Mapping[str, str] | None = None,
             uuid_of: UuidOf = cuda_uuid, nodes: dict[int, str] | None = None,
             proc_gpus: Path = PROC_GPUS) -> tuple[GpuView | None, str]:
    """(view, why): the view of a CUDA device's child; None with "" where the host has one GPU
    node or none (nothing to hide), None with the reason where it cannot be made."""
    env = os.environ if env is None else env
    nodes = gpu_nodes() if nodes is None else nodes
    if len(nodes) < 2 or not device.startswith("cuda"):
        return None, ""
    index = int(device.partition(":")[2] or 0)
    visible = env.get("CUDA_VISIBLE_DEVICES", "")
    key = (index, visible, env.get("CUDA_DEVICE_ORDER", ""))
    if key in _cache:
        return _cache[key]
    if "mig-" in visible.lower():
        found: tuple[GpuView | None, str] = (
            None, "MIG instances named in CUDA_VISIBLE_DEVICES: the host's other GPUs stay "
                  "reachable")
    else:
        try:
            uuid = uuid_of(index, env)
        except RuntimeError as exc:  # not kept: the next child asks again
            return None, f"{exc}: the host's other GPUs stay reachable"
        found = _make(uuid, nodes, proc_gpus)
    _cache[key] = found
    return found


def _make(uuid: str, nodes: dict[int, str], proc_gpus: Path) -> tuple[GpuView | None, str]:
    minor = driver_minors(proc_gpus).get(uuid)
    if minor is None or minor not in nodes:
        return None, f"no node of {uuid} in the driver's list: the host's other GPUs stay " \
                     "reachable"
    covered = tuple(path for m, path in sorted(nodes.items()) if m != minor)
    return GpuView(uuid, minor, covered), ""


def job_inside(job_text: str) -> str:
    """The job as a child with a view of one GPU reads it: its device is ``cuda:0``."""
    try:
        job = json.loads(job_text)
    except ValueError:
        return job_text
    if not isinstance(job, dict) or not str(job.get("device", "")).startswith("cuda"):
        return job_text
    return json.dumps({**job, "device": "cuda:0"})
