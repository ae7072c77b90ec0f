"""The Ray backend: the same evaluation jobs as Ray tasks of one GPU each.

``--cluster ray://HOST:PORT`` (Ray Client), ``--cluster HOST:PORT`` (a driver on a cluster
node) or ``RAY_ADDRESS`` in the environment picks it. Ray schedules: every evaluation is a
task asking for ``num_gpus=1`` (``num_cpus=1`` on a cluster without GPUs), so Ray never puts
two timed evaluations on one GPU, and queues the rest. This process keeps the static gate
(it runs no candidate code) and asks for at most as many evaluations at once as the cluster
has GPUs (or CPUs), so the session's progress shows what runs and what waits.

A task's build happens on the node that evaluates it (build caches are per node); the
evaluator package is shipped to the workers with the job, which need torch (and nvcc,
ninja and g++ for CUDA candidates), as on one host.
"""

from __future__ import annotations

import importlib
import os
import threading
from pathlib import Path
from typing import Any

import cudal1_evaluator
from cudal1_evaluator.schema import Job, ProbeJob, ProbeResult, Result
from cudal1_tui.cluster import ray_tasks
from cudal1_tui.engine.fleet import Fleet
from cudal1_tui.engine.lanes import SlotLanes
from cudal1_tui.errors import FleetError
from cudal1_tui.judging import IsolatedJudge, Prepared, Progress, unevaluated

INSTALL_FIX = "install the Ray extra: pip install 'cudal1-tui[ray]'"
POLL_S = 0.2


def import_ray() -> Any:
    try:
        return importlib.import_module("ray")
    except ImportError as exc:
        raise FleetError(f"a Ray cluster was asked for, but Ray is not installed ({exc})",
                          fix=INSTALL_FIX + ", or pass --cluster local (unset RAY_ADDRESS)"
                          ) from exc


def runtime_env() -> dict[str, Any]:
    """The evaluator package travels with the job: workers need torch, not cudal1-tui."""
    return {"py_modules": [str(Path(cudal1_evaluator.__file__).resolve().parent)]}


def ship_tasks(ray: Any) -> None:
    """The task functions go by value: ``cudal1_tui`` need not exist on the workers."""
    ray.cloudpickle.register_pickle_by_value(ray_tasks)


def connect(ray: Any, address: str) -> None:
    """Join the cluster (unless this process already has, e.g. a test's local instance)."""
    ship_tasks(ray)
    if ray.is_initialized():
        return
    try:
        ray.init(address=address, runtime_env=runtime_env(), log_to_driver=False,
                 logging_level="WARNING")
    except Exception as exc:  # Ray raises ConnectionError, RuntimeError, ValueError, ...
        raise FleetError(f"cannot reach the Ray cluster at {address}: {exc}",
                          fix="start it (`ray start --head`) or check the address "
                              "(ray://HOST:10001 for Ray Client, HOST:6379 on a node)") from exc


class RayJudge(IsolatedJudge):
    """The gate here; build, verification and timing in a Ray task; the probe too."""

    def __init__(self, ray: Any, gpus: bool) -> None:
        self._ray = ray
        need = {"num_gpus": 1, "num_cpus": 1} if gpus else {"num_cpus": 1}
        self._evaluate = ray.remote(ray_tasks.evaluate_task).options(max_retries=0, **need)
        self._probe = ray.remote(ray_tasks.probe_task).options(max_retries=0, **need)

    def build(self, job: Job, prepared: Prepared, cancel: threading.Event) -> Prepared:
        return prepared  # the task that evaluates builds too, on its node's cache

    def evaluate(self, job: Job, prepared: Prepared, *, on_progress: Progress | None = None,
                 cancel: threading.Event | None = None) -> Result:
        if on_progress is not None:
            on_progress("verifying", 0, 0, "evaluating on the Ray cluster")
        ref = self._evaluate.remote(job.to_json(), os.environ.get(ray_tasks.OMP))
        text = self._wait(ref, cancel)
        if text is None:
            return unevaluated("runtime_error", "cancelled while evaluating on the cluster",
                               reward=job.reward, job_id=job.job_id)
        result = Result.from_json(text)
        result.flags = [f.to_flag() for f in prepared.findings] + result.flags
        return result

    def probe(self, job: ProbeJob) -> ProbeResult:
        text = self._wait(self._probe.remote(job.to_json(), os.environ.get(ray_tasks.OMP)), None)
        return ProbeResult.from_json(text or "{}")

    def _wait(self, ref: Any, cancel: threading.Event | None) -> str | None:
        """The task's JSON; None when cancelled (the task is killed, its children with it)."""
        while True:
            done, _ = self._ray.wait([ref], timeout=POLL_S)
            if done:
                return str(self._ray.get(done[0]))
            if cancel is not None and cancel.is_set():
                self._ray.cancel(ref, force=True)
                return None


def ray_fleet(address: str, device_setting: str) -> Fleet:
    ray = import_ray()
    connect(ray, address)
    resources = ray.cluster_resources()
    gpus = int(resources.get("GPU", 0))
    if device_setting == "cpu" or (device_setting == "auto" and gpus == 0):
        gpus = 0
    elif gpus == 0:
        raise FleetError(f"--device {device_setting}: the Ray cluster at {address} has no GPU",
                          fix="add GPU nodes, or pass --device cpu")
    width = gpus or int(resources.get("CPU", 1))
    device = "cuda" if gpus else "cpu"
    what = f"{gpus} GPU(s)" if gpus else f"{width} CPU(s)"
    return Fleet(SlotLanes(width, device), RayJudge(ray, gpus > 0), device,
                 f"Ray cluster at {address}: {what}", close_hook=ray.shutdown)
