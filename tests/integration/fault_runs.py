"""Driving a real headless run to a point and hurting it there (the fault suite's helpers).

Runs are ``python -m cudal1_tui run --headless`` from this checkout, with TMPDIR, the cache
and the sessions dir inside the test's folder: every process of the run has its working dir
or its command line under that folder, which is how ``run_processes`` finds them after their
parent is gone (orphans are re-parented, so a process tree no longer leads to them).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from procs import descendants

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

MODEL_REPLY = """## Performance Analysis
A dense GEMM against a diagonal matrix wastes work.

## Algorithm Design
Scale the rows with a broadcast multiply.

## Code Implementation
```python
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
{body}
```
"""
BROADCAST = "        return a.unsqueeze(-1) * b"
SPIN = "        while True:\n            pass"  # never returns: the evaluator child spins


def reply(body: str = BROADCAST) -> str:
    return MODEL_REPLY.format(body=body)


def env_for(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUDAL1_", "OPENAI_"))}
    (tmp / "tmp").mkdir(exist_ok=True)
    env.update(CUDAL1_CONFIG=str(tmp / "absent.toml"), CUDAL1_BUILD_DIR=str(tmp / "build"),
               CUDAL1_TIMING_BUDGET_S="1", CUDAL1_CORRECTNESS_TRIALS="2",
               CUDAL1_STRICT_THRESHOLD="1000000", CUDAL1_RETRIES="0",
               CUDAL1_CANDIDATES_PER_ROUND="1", CUDAL1_EVAL_TIMEOUT_S="120",
               TMPDIR=str(tmp / "tmp"), XDG_CACHE_HOME=str(tmp / "cache"),
               PYTHONPATH=str(ROOT))
    return env


def command(tmp: Path, problem: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "cudal1_tui", "run", str(EXAMPLES / problem), "--headless",
            "--sessions-dir", str(tmp / "sessions"), "--device", "cpu", "--sizes", "cpu", *args]


@dataclass
class Run:
    """A headless run whose stderr is read line by line as it comes."""

    proc: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)
    _grew: threading.Condition = field(default_factory=threading.Condition)

    @classmethod
    def start(cls, tmp: Path, argv: list[str], **env: str) -> Run:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True, env={**env_for(tmp), **env},
                                cwd=tmp)
        run = cls(proc)
        threading.Thread(target=run._read, daemon=True).start()
        return run

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self._grew:
                self.lines.append(line.rstrip("\n"))
                self._grew.notify_all()
        with self._grew:
            self._grew.notify_all()

    def wait_for(self, text: str, timeout_s: float = 120.0) -> bool:
        """Until a stderr line contains ``text`` (True) or the run ends or time runs out."""
        deadline = time.monotonic() + timeout_s
        with self._grew:
            while not any(text in line for line in self.lines):
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self._pending()):
                    return False
                self._grew.wait(min(left, 0.2))
        return True

    def _pending(self) -> bool:
        return self.proc.stderr is not None and not self.proc.stderr.closed

    def output(self) -> str:
        with self._grew:
            return "\n".join(self.lines)


def run_processes(tmp: Path, exclude: set[int] | None = None) -> list[str]:
    """Processes whose working dir or command line lies under ``tmp`` (a run's processes)."""
    mark, found = str(tmp), []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in (exclude or set()):
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and (cwd.startswith(mark) or mark in cmdline):
            found.append(f"{entry.name}: {cmdline[:160]}")
    return found


GONE_S = 30.0  # a run's processes end within this once it is killed or told to stop


def wait_until_gone(tmp: Path, timeout_s: float = GONE_S) -> list[str]:
    """The run's processes still alive after ``timeout_s`` (empty: all gone; returns as soon
    as they are). The test's own process and its children (git helpers of a session it
    opened) are not the run's. ``GONE_S`` is generous: a survivor outlives any bound, while a
    loaded 2-core host (this suite under ``nice`` beside other jobs) can take seconds to run
    the exit of a process killed while it held gigabytes, or a clean exit's last steps."""
    deadline = time.monotonic() + timeout_s
    while True:
        ours = {os.getpid(), *descendants(os.getpid())}
        left = run_processes(tmp, exclude=ours)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def eval_temp_dirs(tmp: Path) -> list[Path]:
    return sorted((tmp / "tmp").glob("cudal1-eval-*"))
