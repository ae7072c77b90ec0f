"""Leftovers of dead owners swept, live owners' files kept; a cap on a candidate's total disk
use; one timing per device across processes, the second one waiting and saying for whom."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import pytest

from cudal1_evaluator.isolation import lifetime, sandbox
from cudal1_evaluator.parent import verdict
from cudal1_evaluator.schema import Job

ROOT = Path(__file__).resolve().parents[2]

PROBLEM = textwrap.dedent("""
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def forward(self, x):
            return x * 2

    def get_inputs():
        return [torch.randn(4)]

    def get_init_inputs():
        return []
""")
# Writes 1 MB files at import, well past a 20 MB cap (each file is far below RLIMIT_FSIZE).
HOARDER = textwrap.dedent("""
    import os
    import torch.nn as nn

    for i in range(400):
        with open(f"junk{i}.bin", "wb") as fh:
            fh.write(os.urandom(1 << 20))

    class ModelNew(nn.Module):
        def forward(self, x):
            return x * 2
""")

DIGGER = textwrap.dedent("""
    import os, time
    import torch.nn as nn

    fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(300):  # its path passes PATH_MAX: a path walk would not see the bottom
        os.mkdir("d" * 200, dir_fd=fd)
        fd = os.open("d" * 200, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
    time.sleep(600)

    class ModelNew(nn.Module):
        def forward(self, x):
            return x * 2
""")


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _marked_dir(temp_root: Path, name: str, token: str) -> Path:
    path = temp_root / f"{lifetime.TEMP_PREFIX}{name}"
    path.mkdir()
    (path / lifetime.OWNER_FILE).write_text(token + "\n")
    return path


def _lock(build_root: Path, key: str) -> Path:
    lock = build_root / key / "torch_extensions" / "ext" / "lock"
    lock.parent.mkdir(parents=True)
    lock.write_text("")
    return lock


def test_the_lock_sweep_follows_no_link_a_candidate_planted(tmp_path: Path) -> None:
    """Round 17: a build dir's ``torch_extensions`` swapped for a link to a dir of root's had
    the start-up sweep (root) unlink every ``lock`` there (``/var/lib/dpkg/lock``)."""
    temps, builds, victim = tmp_path / "tmp", tmp_path / "builds", tmp_path / "victim"
    temps.mkdir()
    (victim / "app").mkdir(parents=True)
    (victim / "app" / "lock").write_text("root's")
    key = builds / "src-0" / "k1"
    key.mkdir(parents=True)
    (key / "torch_extensions").symlink_to(victim)
    own = _lock(builds, "k2")
    swept = lifetime.sweep_stale([builds], temps)
    assert (victim / "app" / "lock").exists(), "the sweep followed the candidate's link"
    assert swept.locks == [str(own)] and not own.exists()


def test_a_dead_owners_temp_dirs_and_build_locks_are_swept(tmp_path: Path) -> None:
    temps, builds = tmp_path / "tmp", tmp_path / "builds"
    temps.mkdir()
    dead = _marked_dir(temps, "dead", f"{_dead_pid()} 12345")
    lock = _lock(builds, "k1")
    swept = lifetime.sweep_stale([builds], temps)
    assert not dead.exists() and not lock.exists()
    assert swept.temp_dirs == [str(dead)] and swept.locks == [str(lock)]
    assert "1 evaluator temp dir(s), 1 build lock(s)" in swept.summary()


def test_a_dir_its_owner_died_making_is_swept_by_its_name(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Killed right after ``mkdtemp``: no marker was written, the name still says whose it is."""
    temps = tmp_path / "tmp"
    temps.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temps))
    mine = lifetime.make_owned_temp_dir()
    dead_pid = _dead_pid()
    orphan = mine.with_name(mine.name.replace(f"{os.getpid()}_", f"{dead_pid}_", 1))
    mine.rename(orphan)
    kept = lifetime.make_owned_temp_dir()
    swept = lifetime.sweep_stale([], temps)
    assert swept.temp_dirs == [str(orphan)] and not orphan.exists()
    assert kept.exists()  # ours: a child of ours may be using it


def test_a_live_owners_files_are_kept(tmp_path: Path) -> None:
    temps, builds = tmp_path / "tmp", tmp_path / "builds"
    temps.mkdir()
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        live = _marked_dir(temps, "live", lifetime.owner_token(owner.pid))
        lock = _lock(builds, "k2")
        swept = lifetime.sweep_stale([builds], temps)
        assert live.exists() and lock.exists()  # its build may be holding that lock
        assert swept.live_owners and not swept.locks
    finally:
        owner.kill()
        owner.wait()
    lifetime.sweep_stale([builds], temps)
    assert not live.exists() and not lock.exists()


def test_a_pid_reused_by_another_process_is_not_its_owner() -> None:
    me = lifetime.owner_token()
    assert lifetime.owner_alive(me)
    pid, start = me.split()
    assert not lifetime.owner_alive(f"{pid} {int(start) + 1}")


def test_a_candidate_writing_past_the_disk_cap_is_killed_with_a_clear_verdict(
        tmp_path: Path) -> None:
    job = Job(problem_source=PROBLEM, candidate_source=HOARDER, timeout_s=120,
              build_dir=str(tmp_path / "build"))
    limits = sandbox.Limits(memory_mb=4096, disk_mb=20)
    child = sandbox.Child("build", limits, job_text=job.to_json())
    outcome = child.run(job.to_json(), 120)
    assert outcome.disk_exceeded == "more than 20 MB", outcome
    assert "wrote more than 20 MB" in verdict.crash_message(outcome, 4096)
    assert not child.root.exists()


def test_a_candidate_digging_past_what_the_watch_can_walk_is_killed(tmp_path: Path) -> None:
    """Round 14: a tree deeper than PATH_MAX hid its bytes from the disk watch."""
    job = Job(problem_source=PROBLEM, candidate_source=DIGGER, timeout_s=120,
              build_dir=str(tmp_path / "build"))
    child = sandbox.Child("build", sandbox.Limits(memory_mb=4096, disk_mb=20),
                          job_text=job.to_json())
    outcome = child.run(job.to_json(), 120)
    assert "deeper than" in outcome.disk_exceeded, outcome
    assert not outcome.timed_out  # killed by the watch, not by the clock
    assert "deeper than" in verdict.crash_message(outcome, 4096)
    assert not child.root.exists()


HOLDER = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {root!r})
    from pathlib import Path
    from cudal1_tui.engine.device_lock import hold_device
    with hold_device("cpu", "session s-holder", root=Path({locks!r})):
        print("held", flush=True)
        time.sleep(600)
""")


def test_a_second_session_waits_for_the_device_and_says_for_whom(tmp_path: Path) -> None:
    from cudal1_tui.engine.device_lock import hold_device

    locks = tmp_path / "locks"
    script = HOLDER.format(root=str(ROOT), locks=str(locks))
    holder = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        told: list[str] = []
        threading.Timer(1.0, holder.kill).start()  # killed -9: the kernel drops its flock
        started = time.monotonic()
        with hold_device("cpu", "session s-waiter", on_wait=told.append, root=locks) as held:
            waited = time.monotonic() - started
            assert held
            assert (locks / "device-cpu.lock").read_text().startswith("session s-waiter")
    finally:
        holder.kill()
        holder.wait()
    assert told == [f"waiting for the device: session s-holder (pid {holder.pid}) "
                    "is timing on cpu"]
    assert waited >= 0.5


def test_a_cancel_ends_the_wait_for_the_device(tmp_path: Path) -> None:
    from cudal1_tui.engine.device_lock import hold_device

    cancel = threading.Event()
    with hold_device("cuda:0", "first", root=tmp_path):
        threading.Timer(0.3, cancel.set).start()
        results: list[bool] = []

        def second() -> None:
            with hold_device("cuda:0", "second", cancel=cancel, root=tmp_path) as held:
                results.append(held)

        thread = threading.Thread(target=second)
        thread.start()
        thread.join(timeout=5)
    assert results == [False]
    assert os.path.exists(tmp_path / "device-cuda_0.lock")


def _stopped_orphan(job_dir: Path) -> int:
    """A stopped evaluator child whose parent is gone: what a run killed while it held its
    referee stopped left behind (issue 23). Its command line names the job in ``job_dir``."""
    code = "import os, signal, sys, time; os.kill(os.getpid(), signal.SIGSTOP); time.sleep(600)"
    launcher = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, sys; p = subprocess.Popen(sys.argv[1:]); "
         "print(p.pid, flush=True)", sys.executable, "-c", code, "-m", "cudal1_evaluator",
         "_child", "referee", str(job_dir / "job.json")], stdout=subprocess.PIPE, text=True)
    assert launcher.stdout is not None
    pid = int(launcher.stdout.readline())
    launcher.wait()
    deadline = time.monotonic() + 10
    while _state(pid) != "T" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _state(pid) == "T"
    return pid


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return ""


def test_a_stopped_child_of_a_killed_run_is_ended_at_the_next_start(tmp_path: Path) -> None:
    from cudal1_tui.config import Settings
    from cudal1_tui.engine.opening import sweep_leftovers

    temp_root = Path(tempfile.gettempdir())
    dead_dir = temp_root / f"{lifetime.TEMP_PREFIX}{_dead_pid()}_12345_orphan{os.getpid()}"
    live_dir = temp_root / f"{lifetime.TEMP_PREFIX}{os.getpid()}_" \
        f"{lifetime.start_time(os.getpid())}_kept{os.getpid()}"
    for path in (dead_dir, live_dir):
        path.mkdir()
    orphan, ours = _stopped_orphan(dead_dir), _stopped_orphan(live_dir)
    try:
        sweep_leftovers(Settings(build_dir=str(tmp_path / "b")))
        deadline = time.monotonic() + 10
        while _state(orphan) not in ("", "Z") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _state(orphan) in ("", "Z")  # killed, stopped as it was
        assert not dead_dir.exists()  # and the dir it held swept after it
        assert _state(ours) == "T" and live_dir.exists()  # a live owner's child is left alone
    finally:
        for pid in (orphan, ours):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        for path in (dead_dir, live_dir):
            shutil.rmtree(path, ignore_errors=True)


OWNER = r"""
import os, signal, subprocess, sys, time
from cudal1_evaluator.isolation import lifetime
child = subprocess.Popen(
    [sys.executable, "-c", "from cudal1_evaluator.isolation import lifetime\n"
     "lifetime.bind_to_parent()\nprint('bound', flush=True)\nimport time\ntime.sleep(60)"],
    env={**os.environ, **lifetime.child_env()}, pass_fds=(lifetime.watchdog_fd(),),
    start_new_session=True, stdout=subprocess.PIPE, text=True)
child.stdout.readline()  # bound and its watcher forked (a fixed second's nap was all this
# waited for once, short on a loaded host): then until the watcher has left the child's group


def watcher_apart():
    for entry in os.listdir("/proc"):
        try:
            fields = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if entry != str(child.pid) and fields[3] == str(child.pid) and fields[2] == entry:
            return True
    return False


deadline = time.monotonic() + 60
while not watcher_apart() and time.monotonic() < deadline:
    time.sleep(0.05)
os.killpg(child.pid, signal.SIGSTOP)  # as the evaluator stops a child by its group
print(child.pid, flush=True)
time.sleep(60)
"""


def test_a_child_stopped_by_its_group_dies_with_its_killed_owner() -> None:
    """The owner is killed while it holds its child stopped: the child and its watcher (which
    kills the child's session) are gone within seconds, none left stopped."""
    owner = subprocess.Popen([sys.executable, "-c", OWNER], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert owner.stdout is not None
        child = int(owner.stdout.readline())
        session = [pid for pid in _all_pids() if _session_of(pid) == child]
        assert child in session and len(session) >= 2  # the child and its watcher
        owner.kill()
        owner.wait()
        deadline = time.monotonic() + 10
        while any(_state(pid) not in ("", "Z") for pid in session) and \
                time.monotonic() < deadline:
            time.sleep(0.05)
        assert [pid for pid in session if _state(pid) not in ("", "Z")] == []
    finally:
        owner.kill()


def _all_pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _session_of(pid: int) -> int:
    try:
        fields = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
        return int(fields[3])
    except (OSError, IndexError, ValueError):
        return -1
