"""Can the referee read a runner's output memory in place? (CUDA IPC across processes, and
across our PID namespace). ``python benchmarks/ipc_probe.py`` on a GPU host prints one line
per case."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import torch

from cudal1_evaluator.wire.cuda_ipc import Mapper, view_at

CHILD = r"""
import json, sys, torch
from cudal1_evaluator.wire.cuda_ipc import Exporter
t = torch.arange(1000, dtype=torch.float32, device="cuda") * 3
torch.cuda.synchronize()
table, index = [], {}
loc = Exporter().locate(t, table, index)
print(json.dumps({"handles": table, "loc": loc}), flush=True)
sys.stdin.readline()
"""


def case(name: str, prefix: list[str]) -> None:
    proc = subprocess.Popen([*prefix, sys.executable, "-c", CHILD], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdin is not None
    said = json.loads(proc.stdout.readline())
    mapper = Mapper(torch.device("cuda"))
    import base64
    seg = mapper.segment(base64.b64decode(said["handles"][0])) if said["loc"] else None
    like = torch.empty(1000, device="cuda")
    view = view_at(seg, said["loc"][1], like) if seg is not None else None
    ok = view is not None and torch.equal(view, torch.arange(1000, device="cuda") * 3.0)
    print(f"{name}: located {said['loc'] is not None}, mapped {seg is not None} "
          f"(driver {mapper.last_error}), values right {ok}")
    proc.stdin.write("\n")
    proc.stdin.flush()
    proc.wait()
    mapper.close()


if __name__ == "__main__":
    torch.zeros(1, device="cuda")
    case("plain processes", [])
    if shutil.which("unshare"):
        case("child in its own user+PID namespace",
             ["unshare", "--user", "--map-root-user", "--pid", "--fork", "--mount-proc"])
