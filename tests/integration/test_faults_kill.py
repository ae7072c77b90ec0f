"""kill -9, SIGTERM and SIGHUP at points of a real headless run: nothing of it survives
(``GONE_S``), and the next start removes the temp dirs it left.

Points are reached by watching the run's own progress lines (no hooks in the product): the
run is really probing, streaming, compiling, verifying, timing or committing when it is hit.
"""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from fault_runs import (
    GONE_S,
    ROOT,
    SPIN,
    Run,
    command,
    env_for,
    eval_temp_dirs,
    reply,
    run_processes,
    wait_until_gone,
)

from cudal1_tui.replay import ReplayConfig, ReplayServer, Reply

CPP_REPLY_HEAD = '''## Performance Analysis
Row scaling in C++.

## Algorithm Design
One loop.

## Code Implementation
```python
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SRC = """
#include <torch/extension.h>
torch::Tensor scale_rows(torch::Tensor a, torch::Tensor b) {
    return a.unsqueeze(-1) * b;
}
"""
_ext = load_inline(name="fault_scale_rows", cpp_sources=_SRC, functions=["scale_rows"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return _ext.scale_rows(a, b)
```
'''


@dataclass(frozen=True)
class Point:
    name: str
    sig: signal.Signals
    wait_for: str  # a progress line fragment; "" = a fixed delay after start
    reply: str = reply()
    latency_s: float = 0.0
    extra: tuple[str, ...] = ()
    until_process: str = ""  # after the line, also wait for a process whose argv has this


POINTS = [
    Point("start-up", signal.SIGKILL, ""),
    Point("probe", signal.SIGTERM, "probing"),
    Point("model call", signal.SIGHUP, "slot 0: generating", latency_s=0.3),
    Point("parse", signal.SIGKILL, "slot 0: parsing", reply=reply() + "x" * 2_000_000),
    Point("compile", signal.SIGKILL, "slot 0: compiling", reply=CPP_REPLY_HEAD,
          until_process="cc1plus"),
    Point("correctness", signal.SIGTERM, "slot 0: verifying", reply=reply(SPIN)),
    Point("timing", signal.SIGHUP, "slot 0: timing"),
    Point("trace write", signal.SIGKILL, "slot 0: recording"),
    Point("git commit", signal.SIGTERM, "slot 0: r001s0-", extra=("--accept-best",)),
]


def _wait_for_process(tmp: Path, name: str, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if any(name in p for p in run_processes(tmp)):
            return True
        time.sleep(0.05)
    return False


def _next_start_sweeps(tmp: Path) -> None:
    """A later start (here one that stops at a broken problem) removes what the run left."""
    broken = ROOT / "tests" / "data" / "broken_problems" / "no_model.py"
    done = subprocess.run([sys.executable, "-m", "cudal1_tui", "run", str(broken), "--headless",
                           "--device", "cpu", "--sessions-dir", str(tmp / "sessions")],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          env=env_for(tmp), cwd=tmp, timeout=60)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert eval_temp_dirs(tmp) == []
    assert not list((tmp / "build").glob("*/torch_extensions/*/lock"))


@pytest.mark.parametrize("point", POINTS, ids=[p.name for p in POINTS])
def test_nothing_of_a_killed_run_survives(tmp_path: Path, point: Point) -> None:
    config = ReplayConfig(replies=(Reply(point.reply),), latency_s=point.latency_s,
                          chunk_chars=24 if point.latency_s else 65536)
    with ReplayServer(config) as server:
        run = Run.start(tmp_path, command(tmp_path, "diag_matmul.py", "--no-builtin",
                                          "--rounds", "1", "--base-url", server.base_url,
                                          *point.extra))
        if point.wait_for:
            reached = run.wait_for(point.wait_for, timeout_s=150)
            assert reached, f"the run never reached {point.name}:\n{run.output()}"
        else:
            time.sleep(0.5)
        if point.until_process:
            assert _wait_for_process(tmp_path, point.until_process, 120), run.output()
        run.proc.send_signal(point.sig)
        left = wait_until_gone(tmp_path)
        run.proc.wait(timeout=GONE_S)
    assert left == [], f"still running {GONE_S:g} s after {point.sig.name} at {point.name}: {left}"
    if point.sig != signal.SIGKILL:  # a handled signal: a clean exit through the normal path
        assert run.proc.returncode == 128 + point.sig, run.output()
        assert "Traceback" not in run.output()
    _next_start_sweeps(tmp_path)


def test_the_app_ends_through_its_normal_exit_on_sigterm(tmp_path: Path) -> None:
    """The TUI in a real terminal (a pty): SIGTERM closes the session and exits with 0."""
    env = {**env_for(tmp_path), "TERM": "xterm-256color"}
    argv = [sys.executable, "-m", "cudal1_tui", str(ROOT / "examples" / "relu.py"),
            "--device", "cpu", "--sizes", "cpu", "--sessions-dir", str(tmp_path / "sessions")]
    pid, fd = pty.fork()
    if pid == 0:  # the child: become the app
        os.chdir(tmp_path)
        os.execve(sys.executable, argv, env)
    # the app's own header (the problem is probed first, before any screen)
    screen = _read_until(fd, b"reference (", timeout_s=90)
    assert b"reference (" in screen, screen[-2000:]
    os.kill(pid, signal.SIGTERM)
    status = _reap(fd, pid, timeout_s=30)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    assert wait_until_gone(tmp_path) == []


def _read_until(fd: int, marker: bytes, timeout_s: float) -> bytes:
    seen, deadline = b"", time.monotonic() + timeout_s
    while marker not in seen and time.monotonic() < deadline:
        if select.select([fd], [], [], 0.2)[0]:
            try:
                seen += os.read(fd, 65536)
            except OSError:
                break
    return seen


def _reap(fd: int, pid: int, timeout_s: float) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        _read_until(fd, b"\0never", timeout_s=0.2)  # keep the pty drained
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            os.close(fd)
            return status
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    raise AssertionError("the app did not exit within 30 s of SIGTERM")


def test_nothing_of_a_killed_export_survives_and_the_next_export_is_whole(
        tmp_path: Path) -> None:
    """The tenth point: `export` killed -9 mid-write; the next one writes every row."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from store_builders import populated_session

    session, records = populated_session(tmp_path / "sessions")
    session.close()
    target = tmp_path / "out.jsonl"
    argv = [sys.executable, "-m", "cudal1_tui", "export", str(session.path), "--format",
            "jsonl", "-o", str(target), "--sessions-dir", str(tmp_path / "sessions")]
    first = subprocess.Popen(argv, env=env_for(tmp_path), cwd=tmp_path,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.8)  # mid-import or mid-write
    first.kill()
    first.wait()
    assert wait_until_gone(tmp_path) == []
    again = subprocess.run(argv, env=env_for(tmp_path), cwd=tmp_path, capture_output=True,
                           text=True, timeout=60)
    assert again.returncode == 0, again.stderr
    assert len(target.read_text().splitlines()) == len(records)


CUDA_REPLY = '''## Performance Analysis
Row scaling on the GPU.

## Algorithm Design
One thread per output element.

## Code Implementation
```python
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CUDA = r"""
#include <torch/extension.h>
__global__ void scale_rows_kernel(const float* a, const float* b, float* out, int64_t n,
                                  int64_t m) {
    int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (k < n * m) out[k] = a[k / m] * b[k];
}
torch::Tensor scale_rows(torch::Tensor a, torch::Tensor b) {
    auto out = torch::empty_like(b);
    int64_t n = b.size(0), m = b.size(1);
    int threads = 256;
    int blocks = (int)((n * m + threads - 1) / threads);
    scale_rows_kernel<<<blocks, threads>>>(a.data_ptr<float>(), b.data_ptr<float>(),
                                           out.data_ptr<float>(), n, m);
    return out;
}
"""
_ext = load_inline(name="fault_scale_rows_cuda", cpp_sources="torch::Tensor scale_rows("
                   "torch::Tensor a, torch::Tensor b);", cuda_sources=_CUDA,
                   functions=["scale_rows"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return _ext.scale_rows(a.contiguous(), b.contiguous())
```
'''


def _has_cuda() -> bool:
    query = "import torch, sys; sys.exit(not torch.cuda.is_available())"
    return subprocess.run([sys.executable, "-c", query], capture_output=True).returncode == 0


@pytest.mark.gpu
def test_nothing_of_a_run_killed_mid_nvcc_survives(tmp_path: Path) -> None:
    """On a GPU host: kill -9 while nvcc (cicc, ptxas...) compiles a candidate's kernel."""
    if not _has_cuda():  # asked here, not at collection: a torch import costs seconds
        pytest.skip("needs a CUDA GPU")
    with ReplayServer(ReplayConfig(replies=(Reply(CUDA_REPLY),), chunk_chars=65536)) as server:
        argv = [*command(tmp_path, "diag_matmul.py", "--no-builtin", "--rounds", "1",
                         "--base-url", server.base_url)]
        argv[argv.index("--device") + 1] = "cuda"
        run = Run.start(tmp_path, argv)
        assert run.wait_for("slot 0: compiling", 300), run.output()
        assert _wait_for_process(tmp_path, "nvcc", 300), run.output()
        run.proc.kill()
        left = wait_until_gone(tmp_path)
        run.proc.wait(timeout=GONE_S)
    assert left == [], f"still running {GONE_S:g} s after SIGKILL mid-nvcc: {left}"
    _next_start_sweeps(tmp_path)
