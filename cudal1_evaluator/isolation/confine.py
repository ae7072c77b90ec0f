"""The OS sandbox a child applies to itself first thing (stdlib only: before torch is imported).

Layers, each degrading with a stated reason:
- file system: read-only except the writable dirs the parent names (the child's private dir,
  the build cache, ...) and ``/dev``: landlock where the kernel has it (ctypes syscalls), else
  a private mount namespace with everything remounted read-only, else none (``bwrap`` wraps the
  child from the parent's side when neither works: see ``cudal1_evaluator.isolation.sandbox``);
- network: a fresh network namespace (no interfaces but a down loopback), entered directly as
  root or inside a new user namespace otherwise; landlock (ABI 4+) also refuses TCP bind and
  connect, and (ABI 6+) signals to processes outside the sandbox;
- a separate uid (``nobody``) when the child runs as root and the interpreter's files are
  readable by it; its private dirs are handed to that uid first.

Landlock's restriction is per thread and inherited: it is applied while the child is still
single-threaded. ``narrow_writes`` stacks a second, narrower layer later (the worker's own
build dir only), which binds the calling thread and the threads it starts afterwards.
"""

from __future__ import annotations

import ctypes
import os
import resource
import stat
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cudal1_evaluator.isolation import landlock, lifetime, mountns

SANDBOX_UID = lifetime.SANDBOX_UID  # nobody
# Tasks (processes and threads) of every candidate running as nobody at once, where no cgroup
# counts each child's own: a fork bomb stops here, far above what honest builds and torch's
# thread pools (a few per core, per child) use.
TASKS_MOST = max(8192, 64 * (os.cpu_count() or 1))
# Tasks of one child, where its cgroup counts them: then the uid-wide cap is lifted, so one
# child holding all it may hold starves no other (round 18: one child at the uid-wide cap left
# every other nobody child unable to start a thread).
TASKS_A_CHILD = max(2048, 32 * (os.cpu_count() or 1))


@dataclass
class Confinement:
    """Which layers hold in this process, and why the others do not."""

    layers: dict[str, str] = field(default_factory=dict)  # layer -> what is active
    missing: dict[str, str] = field(default_factory=dict)  # layer -> why it is not
    private: tuple[str, ...] = ()
    writable: tuple[str, ...] = ()  # the first layer's dirs
    landlocked: bool = False

    def summary(self) -> str:
        on = "; ".join(f"{k}: {v}" for k, v in self.layers.items()) or "no OS sandbox layer"
        off = "; ".join(f"no {k} ({v})" for k, v in self.missing.items())
        return f"{on}; {off}" if off else on


_STATE: Confinement | None = None


def current() -> Confinement | None:
    """The confinement applied in this process, if any (None outside an evaluator child)."""
    return _STATE


def private_dirs() -> tuple[str, ...]:
    """The child's private dirs (home, temp): candidate territory. Empty outside a child."""
    return _STATE.private if _STATE is not None else ()


def apply(writable: list[str], *, private: list[str], layers: str = "auto",
          fixed_size: Sequence[str] = (), served: Sequence[str] = (),
          tasks_counted: bool = False) -> Confinement:
    """Confine this process (call it once, single-threaded, before importing anything big).

    ``layers``: ``auto``; ``uid`` (``auto`` plus a separate uid when root); ``mountns`` (skip
    landlock, for tests of the fallback); ``bwrap``
    (the parent wrapped the child already); ``off``. ``fixed_size``: writable dirs whose
    files may not be truncated (the exchange dirs: the referee maps their files). ``served``:
    the build caches a warm child is served one dir of later (never handed back whole: the
    dir it gets is handed to it when it is bound). ``tasks_counted``: the child's own cgroup
    caps its tasks (no uid-wide cap then)."""
    global _STATE
    state = Confinement(private=tuple(os.path.realpath(p) for p in private),
                        writable=tuple(os.path.realpath(p) for p in writable))
    if layers == "off":
        state.missing["sandbox"] = "turned off by the parent"
        _STATE = state
        return state
    for path in writable:
        with _suppress():
            Path(path).mkdir(parents=True, exist_ok=True)
    if layers == "bwrap":  # the parent wrapped this child: files and network are done
        state.layers["files"] = "bubblewrap: read-only root, writable dirs bound"
        state.layers["network"] = "bubblewrap --unshare-net"
    else:
        _network(state)
    if layers == "uid":
        _separate_uid(state, [*private, *writable], served, tasks_counted)
    else:
        state.missing["separate uid"] = (
            "off: this child stays uid 0, capabilities dropped (a trusted child, "
            "CUDAL1_SANDBOX=mountns, or a GPU whose device nodes only root and a group may "
            "open; candidate children started as root run as nobody: CUDAL1_SANDBOX=uid)")
    if layers != "bwrap":
        _filesystem(state, writable, use_landlock=layers != "mountns", fixed_size=fixed_size)
    _STATE = state
    return state


class _suppress:
    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, exc: object, tb: object) -> bool:
        return isinstance(exc, OSError)


def _device_dirs() -> list[str]:
    """Where a child must be able to write to use a GPU: device nodes, and on an NVIDIA host
    ``/proc`` (the driver writes there while CUDA initialises: without it CUDA fails with
    error 304, measured on an H100 under landlock). Files that exist only: a candidate once
    left files in the host's ``/dev`` (a devtmpfs in memory) that outlived it (round 15)."""
    return ["/dev", "/proc"] if os.path.exists("/dev/nvidiactl") else ["/dev"]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _unshare(flags: int) -> str:
    """"" or why ``unshare(flags)`` failed."""
    if _libc().unshare(flags) == 0:
        return ""
    return os.strerror(ctypes.get_errno())


CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET = 0x00020000, 0x10000000, 0x40000000


def _network(state: Confinement) -> None:
    if os.geteuid() == 0:
        why = _unshare(CLONE_NEWNET)
        if not why:
            state.layers["network"] = "own network namespace"
            return
    uid, gid = os.geteuid(), os.getegid()
    why = _unshare(CLONE_NEWUSER | CLONE_NEWNET)
    if why:
        state.missing["network namespace"] = f"unshare: {why}"
        return
    try:
        Path("/proc/self/setgroups").write_text("deny")
        Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
        Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
    except OSError as exc:
        state.missing["user mapping"] = str(exc)
    state.layers["network"] = "own network namespace (in a user namespace)"


def _readable_by_others(path: str) -> str:
    """"" when every directory up to ``path`` is searchable by others, else the first that
    is not."""
    current = Path(os.path.realpath(path))
    for part in [current, *current.parents]:
        try:
            mode = part.stat().st_mode
        except OSError:
            return str(part)
        if stat.S_ISDIR(mode) and not mode & stat.S_IXOTH:
            return str(part)
    return ""


def _separate_uid(state: Confinement, owned: list[str], served: Sequence[str] = (),
                  tasks_counted: bool = False) -> None:
    """Drop to ``nobody`` after handing it the dirs it must write (all evaluator-made)."""
    if os.geteuid() != 0:
        state.layers["uid"] = f"runs as uid {os.geteuid()} (not root)"
        return
    import cudal1_evaluator

    needed = [sys.executable, sys.prefix, os.path.dirname(cudal1_evaluator.__file__ or ".")]
    closed = next(filter(None, map(_readable_by_others, needed)), "")
    if closed:
        state.missing["separate uid"] = (f"{closed} is not readable by uid {SANDBOX_UID}: "
                                         "the child stays root")
        _own_dirs(owned, served, 0)
        return
    try:  # its dirs were handed to it by the parent before it started
        os.setgroups([])
        os.setresgid(SANDBOX_UID, SANDBOX_UID, SANDBOX_UID)
        # uid 0 forks without a cap; as nobody the kernel counts every task of the uid, of
        # every child: only where no cgroup counts this child's own
        # (raising the hard limit needs a capability a container may not give)
        hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]
        if not tasks_counted:
            hard = TASKS_MOST if hard == resource.RLIM_INFINITY else min(TASKS_MOST, hard)
        resource.setrlimit(resource.RLIMIT_NPROC, (hard, hard))
        os.setresuid(SANDBOX_UID, SANDBOX_UID, SANDBOX_UID)
    except (OSError, ValueError) as exc:
        state.missing["separate uid"] = f"cannot switch to uid {SANDBOX_UID}: {exc}"
        return
    _clear_uid_keyrings()
    state.layers["uid"] = f"uid {SANDBOX_UID} (nobody)"


_KEYCTL = {"x86_64": 250, "aarch64": 219}
_KEYCTL_CLEAR, _USER_KEYRING, _USER_SESSION_KEYRING = 7, -4, -5


def _clear_uid_keyrings() -> None:
    """Empty the kernel keyrings every process of uid ``nobody`` shares: they outlive an
    evaluation, and an earlier candidate's keys were read by the next one (round 17).
    Candidates running at the same time still share them (Known limits)."""
    number = _KEYCTL.get(os.uname().machine)
    if number is None:
        return
    libc = _libc()
    for ring in (_USER_KEYRING, _USER_SESSION_KEYRING):
        libc.syscall(ctypes.c_long(number), ctypes.c_long(_KEYCTL_CLEAR), ctypes.c_long(ring))


def _own_dirs(owned: Sequence[str], served: Sequence[str], uid: int) -> None:
    """Hand the dirs a root-started child writes back to ``uid``, whole (a served cache's
    root not at all): the parent handed them to ``nobody``, and this child stays root."""
    shallow = {os.path.realpath(p) for p in served}
    for top in owned:
        if os.path.realpath(top) not in shallow:
            lifetime.give_dir(Path(top), uid)


def _filesystem(state: Confinement, writable: list[str], *, use_landlock: bool,
                fixed_size: Sequence[str] = ()) -> None:
    dirs = [*writable, *_device_dirs()]
    if use_landlock:  # /dev holds the exchange dirs (/dev/shm): no truncation beneath it either
        done, why = landlock.restrict_writes(dirs, fixed_size=[*fixed_size, "/dev"],
                                             files_only=_device_dirs())
        if done:
            state.layers["files"] = f"landlock {done}: writes only to {len(writable)} dirs"
            state.landlocked = True
            return
        state.missing["landlock"] = why
    done, why = mountns.read_only_except(dirs)
    if done:
        state.layers["files"] = f"mount namespace: read-only except {len(writable)} dirs"
        return
    state.missing["read-only file system"] = why


def narrow_writes(dirs: list[str]) -> str:
    """Stack a narrower landlock layer on the calling thread: ``dirs`` instead of the first
    layer's dirs that contain them (the whole build cache becomes this candidate's own build
    dir); the others (private dirs, an exchange dir, ``/dev``) stay. "" when done, else why
    not (not confined by landlock here)."""
    if _STATE is None or not _STATE.landlocked:
        return "not landlocked"
    real = [os.path.realpath(d) for d in dirs]
    kept = [w for w in _STATE.writable if not any(d.startswith(w + os.sep) for d in real)]
    done, why = landlock.restrict_writes([*real, *kept, *_STATE.private, *_device_dirs()],
                                         network=False, files_only=_device_dirs())
    if done:
        _STATE.layers["files"] += f"; narrowed to {len(dirs)} dirs of its own"
        return ""
    return why
