"""Isolation for evaluator subprocesses (stdlib only, no torch).

The parent (the UI process, or ``python -m evaluator run``) never runs candidate
code. It spawns ``python -m evaluator _child MODE JOB.json`` in a new session
with a scrubbed environment, a private home/temp dir and resource limits, reads
the verdict from a pipe the candidate does not know, and kills the whole process
group on timeout, cancel or memory overrun.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from evaluator import channel

ProgressFn = Callable[[str, int, int, str], None]

_KEEP_EXACT = frozenset({
    "PATH", "LANG", "LANGUAGE", "TERM", "TZ", "USER", "LOGNAME", "SHELL",
    "LD_LIBRARY_PATH", "LIBRARY_PATH", "CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH",
    "CC", "CXX", "CFLAGS", "CXXFLAGS", "LDFLAGS", "NVCC_APPEND_FLAGS", "NVCC_PREPEND_FLAGS",
    "MAX_JOBS", "CONDA_PREFIX", "VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME",
    "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE",
})
_KEEP_PREFIXES = (
    "CUDA_", "NVIDIA_", "TORCH_", "TORCHINDUCTOR_", "TRITON_", "CUDNN_", "CUBLAS_",
    "OMP_", "MKL_", "KMP_", "OPENBLAS_", "LC_", "PYTORCH_",
)
_SECRET_WORDS = re.compile(
    r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE", re.IGNORECASE
)
_SECRET_PREFIXES = (
    "OPENAI_", "HF_", "HUGGING", "AWS_", "AZURE_", "GOOGLE_", "GCP_", "ANTHROPIC_",
    "GITHUB_", "GH_", "WANDB_", "GITLAB_",
)


def is_secret(name: str) -> bool:
    upper = name.upper()
    return bool(_SECRET_WORDS.search(upper)) or upper.startswith(_SECRET_PREFIXES)


def scrub_env(env: dict[str, str], *, home: Path, tmpdir: Path) -> dict[str, str]:
    """Keep an allow-list of build/runtime variables, never anything that looks secret."""
    kept = {
        name: value
        for name, value in env.items()
        if (name in _KEEP_EXACT or name.startswith(_KEEP_PREFIXES)) and not is_secret(name)
    }
    package_root = str(Path(__file__).resolve().parent.parent)
    python_path = [package_root, *filter(None, kept.get("PYTHONPATH", "").split(os.pathsep))]
    kept.update({
        "HOME": str(home),
        "TMPDIR": str(tmpdir),
        "TMP": str(tmpdir),
        "TEMP": str(tmpdir),
        "PYTHONPATH": os.pathsep.join(dict.fromkeys(python_path)),
        "PYTHONFAULTHANDLER": "1",
        "PYTHONUNBUFFERED": "1",
        "PYTHONNOUSERSITE": "1",
    })
    kept.setdefault("PATH", os.defpath)
    return kept


@dataclass
class Limits:
    """Resource limits the child applies to itself before anything else runs."""

    memory_mb: int | None = None
    address_space: bool = True  # RLIMIT_AS breaks CUDA's address reservations: off on CUDA
    cpu_s: int | None = None
    nofile: int = 4096
    fsize_mb: int = 4096

    def to_arg(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_arg(cls, text: str) -> Limits:
        return cls(**json.loads(text))


def _set(which: int, value: int) -> None:
    _, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(which, (value, value))


def apply_limits(limits: Limits) -> None:
    """Called by the child first thing (a ``preexec_fn`` is unsafe in a threaded parent)."""
    _set(resource.RLIMIT_CORE, 0)
    _set(resource.RLIMIT_NOFILE, limits.nofile)
    _set(resource.RLIMIT_FSIZE, limits.fsize_mb * 1024 * 1024)
    if limits.cpu_s:
        _set(resource.RLIMIT_CPU, limits.cpu_s)
    if limits.memory_mb and limits.address_space:
        _set(resource.RLIMIT_AS, limits.memory_mb * 1024 * 1024)


@dataclass
class Outcome:
    """What happened to one child process."""

    returncode: int | None = None
    signal_name: str = ""
    timed_out: bool = False
    cancelled: bool = False
    memory_exceeded: bool = False
    payload: dict[str, Any] | None = None
    channel_problem: str = ""
    stdout_tail: str = ""
    stderr_tail: str = ""
    last_stage: str = ""
    wall_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


def signal_name(returncode: int | None) -> str:
    if returncode is None or returncode >= 0:
        return ""
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def _rss_mb(pid: int) -> float:
    try:
        pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return 0.0
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def _tail(path: Path, limit: int = 8000) -> str:
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - limit))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _drain(fd: int, sink: bytearray, limit: int) -> None:
    with os.fdopen(fd, "rb", buffering=0) as fh:
        while chunk := fh.read(65536):
            if len(sink) < limit:
                sink.extend(chunk)


class _ProgressReader:
    def __init__(self, fd: int, on_progress: ProgressFn | None) -> None:
        self.last_stage = ""
        self._fd, self._on = fd, on_progress
        self.thread = threading.Thread(target=self._loop, daemon=True, name="eval-progress")

    def _loop(self) -> None:
        with os.fdopen(self._fd, "rb") as fh:
            for line in fh:
                event = channel.parse_progress(line)
                if event is None:
                    continue
                self.last_stage = event[0]
                if self._on is not None:
                    with contextlib.suppress(Exception):
                        self._on(*event)


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


@dataclass
class Spawn:
    """One isolated child run: ``python -m evaluator _child MODE job.json``."""

    mode: str
    job_text: str
    timeout_s: float
    limits: Limits
    cancel: threading.Event | None = None
    on_progress: ProgressFn | None = None
    result_limit: int = 64 * 2**20

    def run(self) -> Outcome:
        root = Path(tempfile.mkdtemp(prefix="cudal1-eval-"))
        try:
            return self._run_in(root)
        finally:
            shutil.rmtree(root, ignore_errors=True)

    def _run_in(self, root: Path) -> Outcome:
        home, tmp = root / "home", root / "tmp"
        home.mkdir()
        tmp.mkdir()
        job_path = root / "job.json"
        job_path.write_text(self.job_text, encoding="utf-8")
        key = channel.new_key()
        result_r, result_w = os.pipe()
        progress_r, progress_w = os.pipe()
        key_r, key_w = os.pipe()
        os.write(key_w, key)
        os.close(key_w)
        argv = [
            sys.executable, "-m", "evaluator", "_child", self.mode, str(job_path),
            "--result-fd", str(result_w), "--progress-fd", str(progress_w),
            "--key-fd", str(key_r), "--limits", self.limits.to_arg(),
        ]
        out_path, err_path = root / "stdout.log", root / "stderr.log"
        started = time.monotonic()
        with out_path.open("wb") as out, err_path.open("wb") as err:
            try:
                proc = subprocess.Popen(
                    argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, cwd=tmp,
                    env=scrub_env(dict(os.environ), home=home, tmpdir=tmp),
                    pass_fds=(result_w, progress_w, key_r), start_new_session=True,
                )
            finally:
                for fd in (result_w, progress_w, key_r):
                    os.close(fd)
        data = bytearray()
        reader = threading.Thread(
            target=_drain, args=(result_r, data, self.result_limit), daemon=True
        )
        reader.start()
        progress = _ProgressReader(progress_r, self.on_progress)
        progress.thread.start()
        outcome = self._wait(proc)
        _kill_group(proc.pid)  # stray grandchildren (ninja, threads' forks) go too
        proc.wait()
        reader.join(timeout=10)
        progress.thread.join(timeout=2)
        outcome.wall_s = time.monotonic() - started
        outcome.returncode = proc.returncode
        outcome.signal_name = "" if outcome.timed_out else signal_name(proc.returncode)
        outcome.payload, outcome.channel_problem = channel.read_verdict(bytes(data), key)
        outcome.stdout_tail, outcome.stderr_tail = _tail(out_path), _tail(err_path)
        outcome.last_stage = progress.last_stage
        return outcome

    def _wait(self, proc: subprocess.Popen[bytes]) -> Outcome:
        outcome = Outcome()
        deadline = time.monotonic() + self.timeout_s
        memory = None if self.limits.address_space else self.limits.memory_mb
        while proc.poll() is None:
            if self.cancel is not None and self.cancel.is_set():
                outcome.cancelled = True
            elif time.monotonic() > deadline:
                outcome.timed_out = True
            elif memory and _rss_mb(proc.pid) > memory:
                outcome.memory_exceeded = True
            else:
                if self.cancel is not None:
                    self.cancel.wait(0.05)
                else:
                    time.sleep(0.05)
                continue
            _kill_group(proc.pid)
            break
        return outcome
