"""Which GPUs of this host the model server uses: from the ``model_gpus`` setting, or detected.

Detection (``model_gpus = "auto"``): the server must be on this machine (its base URL names
localhost or this host); ``nvidia-smi --query-compute-apps`` lists the processes with a CUDA
context and their GPU's UUID, ``nvidia-smi --query-gpu=index,uuid`` numbers the UUIDs, and
the processes that serve the URL's port (the listener and its children)
are matched against that list. When none of them holds a GPU (a server in a container shows
other pids), a process named like a known server (vLLM, SGLang, llama.cpp, Ollama) does.
"""

from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from cudal1_tui.gpushare import listeners, smi
from cudal1_tui.gpushare.smi import ComputeApp, SmiRunner

AUTO, NONE = "auto", "none"
LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "0.0.0.0", "::", ""})
KINDS: tuple[tuple[str, str], ...] = (
    (r"vllm", "vllm"), (r"sglang", "sglang"), (r"llama[-_.]?(server|cpp)", "llama.cpp"),
    (r"ollama", "ollama"), (r"transformers\s+serve", "transformers"),
)
KIND_NAMES = {"vllm": "vLLM", "sglang": "SGLang", "llama.cpp": "llama.cpp",
              "ollama": "Ollama", "transformers": "transformers serve"}


@dataclass(frozen=True)
class ServerGpus:
    """The GPUs (``nvidia-smi`` indices) the model server holds, and how we know."""

    gpus: tuple[int, ...]
    how: str
    kind: str = ""  # vllm, sglang, llama.cpp, ollama, transformers; "" when unknown
    pids: tuple[int, ...] = ()

    def uses(self, gpu: int | None) -> bool:
        return gpu is not None and gpu in self.gpus

    @property
    def name(self) -> str:
        return KIND_NAMES.get(self.kind, "the model server")


def parse_setting(value: str) -> tuple[int, ...] | None:
    """``"0"``, ``"0,1"`` → indices; ``"none"``/``""`` → (); ``"auto"`` → None (detect).
    Raises ValueError for anything else."""
    text = value.strip().lower()
    if text == AUTO:
        return None
    if text in {NONE, ""}:
        return ()
    cells = [c.strip() for c in text.split(",")]
    if not all(c.isdigit() for c in cells):
        raise ValueError(f"model_gpus must be auto, none or GPU indices such as 0 or 0,1, "
                         f"got {value!r}")
    return tuple(sorted({int(c) for c in cells}))


def kind_of(text: str) -> str:
    """The server kind a process name or command line names ("" when none)."""
    lowered = text.lower()
    return next((kind for pattern, kind in KINDS if re.search(pattern, lowered)), "")


def local_port(base_url: str) -> int | None:
    """The port of a server on this machine; None when the URL names another host."""
    parts = urlsplit(base_url if "//" in base_url else f"http://{base_url}")
    host = (parts.hostname or "").lower()
    if host not in LOCAL_HOSTS and not host.startswith("127.") and host != _hostname():
        return None
    try:
        return parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None


def _hostname() -> str:
    try:
        return socket.gethostname().lower()
    except OSError:
        return ""


def detect(base_url: str, setting: str = AUTO, *, run: SmiRunner = smi.run_smi,
           root: Path = listeners.PROC) -> ServerGpus:
    """The model server's GPUs; never raises (an unknown answer is ``gpus=()`` with why)."""
    try:
        fixed = parse_setting(setting)
    except ValueError as exc:
        return ServerGpus((), str(exc))
    port = local_port(base_url)
    servers = listeners.listeners(port, root) if port is not None else set()
    family: set[int] = set()  # the listeners and their descendants
    if servers:  # never this app and its evaluator children
        family = (listeners.descendants(servers, root)
                  - listeners.ours_not_serving(servers, os.getpid(), root))
    kind = next((k for k in (kind_of(listeners.command_line(p, root)) for p in family) if k), "")
    if fixed is not None:
        return ServerGpus(fixed, f"model_gpus = {setting.strip() or NONE}", kind)
    if port is None:
        return ServerGpus((), f"the model server ({base_url}) is not on this machine")
    return _from_smi(run, family, kind)


def _from_smi(run: SmiRunner, family: set[int], kind: str) -> ServerGpus:
    apps = smi.compute_apps(run)
    rows = smi.gpus(run)
    if apps is None or rows is None:
        return ServerGpus((), "nvidia-smi is not available", kind)
    index = {r.uuid: r.index for r in rows}
    mine = [a for a in apps if a.pid in family]
    how = "its processes"
    if not mine:
        mine = [a for a in apps if kind_of(a.process_name)]
        how = "a process named like a model server"
    gpus = tuple(sorted({index[a.gpu_uuid] for a in mine if a.gpu_uuid in index}))
    if not gpus:
        return ServerGpus((), "no GPU process of the model server found", kind)
    kind = kind or next((k for k in (kind_of(a.process_name) for a in mine) if k), "")
    return ServerGpus(gpus, f"detected ({how}: {_pids(mine)})", kind,
                      tuple(sorted({a.pid for a in mine})))


def _pids(apps: list[ComputeApp]) -> str:
    return ", ".join(f"pid {a.pid} {a.process_name}" for a in apps[:4])
