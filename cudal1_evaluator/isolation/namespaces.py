"""Own PID and mount namespaces for a candidate-mode child (stdlib only, ctypes; Linux).

``enter`` runs first thing in the child, before torch and before the rest of the sandbox
(``confine``: landlock forbids mounts once applied). The process unshares a PID and a mount
namespace (and a user namespace when not root), then forks once: the fork is PID 1 of the new
namespace and goes on with the child's work; the original process (the *outer* one) only
waits for it and exits as it did. Every process the candidate starts, ``setsid`` double forks
included, stays in the namespace: the parent finds them all (``isolation.pidtree``), and when
PID 1 dies the kernel kills every one of them.

In the mount namespace PID 1 mounts a fresh ``/proc`` (only the namespace's processes: no other
evaluation's or the referee's ``environ``), and covers the temp dir, ``/dev/shm``, the exchange
base and the build caches with empty tmpfs mounts, then binds back the child's own dirs (its
private root, its exchange dir, its per-source build dir) and, read-only, the interpreter's
dirs found under them. The binds are cloned (``open_tree``) before anything is covered. A warm
child learns its job later, when landlock forbids it to mount: the outer process, never
confined and never running candidate code, binds the per-source build dir on its one request
(``after_job``).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import platform
import re
import resource
import select
import signal
import stat
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

from cudal1_evaluator.isolation import gpu_view, lifetime
from cudal1_evaluator.isolation.dumpable import set_dumpable

CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWUSER = 0x00020000, 0x20000000, 0x10000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWCGROUP = 0x02000000
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REC, _MS_PRIVATE = 2, 4, 8, 0x4000, 1 << 18
_MS_RDONLY, _MS_REMOUNT, _MS_BIND = 1, 32, 4096
_OPEN_TREE_CLONE, _OPEN_TREE_CLOEXEC, _AT_RECURSIVE = 1, os.O_CLOEXEC, 0x8000
_AT_EMPTY_PATH, _MOVE_MOUNT_F_EMPTY_PATH, _AT_FDCWD = 0x1000, 0x4, -100
_MOUNT_ATTR_RDONLY = 1
_SYSCALLS = {"x86_64": (428, 429, 442), "aarch64": (428, 429, 442)}  # open_tree, move_mount,
_PR_SET_PDEATHSIG = 1                                                # mount_setattr
_SOURCE_DIR = re.compile(r"src-[0-9a-f]{16}")
# Every cover is a tmpfs in memory that the candidate may write: each is bounded, so what it
# can write outside the dirs the disk watch counts is bounded too. The temp dir and /dev/shm
# take what honest code writes by a fixed path (glibc's semaphores, a library's "/tmp/x");
# every other hidden place only holds the mount points of dirs bound back.
_TMPFS_OPTS = b"mode=1777,size=64m,nr_inodes=16384"
_COVER_OPTS = b"mode=1777,size=1m,nr_inodes=1024"
LAYER = "process namespace"


@dataclass
class Entered:
    """What ``enter`` achieved: merged into the child's ``confine.Confinement``."""

    layers: dict[str, str] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)


@dataclass
class _Channel:
    """PID 1's ends of the warm child's one request to the outer process."""

    request: int
    ack: int
    roots: tuple[str, ...]  # the served build caches


_channel: _Channel | None = None


class _Mount:
    """ctypes access to the mount syscalls."""

    def __init__(self) -> None:
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.libc.syscall.restype = ctypes.c_long
        self.numbers = _SYSCALLS[platform.machine()]

    def fail(self, what: str) -> OSError:
        errno = ctypes.get_errno()
        return OSError(errno, f"{what}: {os.strerror(errno)}")

    def mount(self, source: bytes | None, target: str, fstype: bytes | None, flags: int,
              data: bytes | None = None) -> None:
        if self.libc.mount(source, target.encode(), fstype, ctypes.c_ulong(flags), data) != 0:
            raise self.fail(f"mount {target}")

    def open_tree(self, dirfd: int, path: str, flags: int) -> int:
        fd = int(self.libc.syscall(ctypes.c_long(self.numbers[0]), ctypes.c_int(dirfd),
                                   path.encode(), ctypes.c_uint(flags)))
        if fd < 0:
            raise self.fail(f"open_tree {path}")
        return fd

    def move_mount(self, tree: int, target: str) -> None:
        if self.libc.syscall(ctypes.c_long(self.numbers[1]), ctypes.c_int(tree), b"",
                             ctypes.c_int(_AT_FDCWD), target.encode(),
                             ctypes.c_uint(_MOVE_MOUNT_F_EMPTY_PATH)) != 0:
            raise self.fail(f"move_mount {target}")

    def read_only(self, tree: int) -> None:
        attr = (ctypes.c_uint64 * 4)(_MOUNT_ATTR_RDONLY, 0, 0, 0)
        if self.libc.syscall(ctypes.c_long(self.numbers[2]), ctypes.c_int(tree), b"",
                             ctypes.c_uint(_AT_EMPTY_PATH | _AT_RECURSIVE), ctypes.byref(attr),
                             ctypes.c_size_t(ctypes.sizeof(attr))) != 0:
            raise self.fail("mount_setattr read-only")


def under(path: str, base: str) -> bool:
    return path == base or path.startswith(base.rstrip(os.sep) + os.sep)


_SEARCH_PATHS = ("PYTHONPATH", "PATH", "LD_LIBRARY_PATH", "LIBRARY_PATH", "CPATH",
                 "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH")
_TOOL_DIRS = ("CUDA_HOME", "CUDA_PATH", "CONDA_PREFIX", "VIRTUAL_ENV")


def interpreter_prefixes() -> list[str]:
    """Where the interpreter itself lives: its prefixes and its executable's dir."""
    found = [sys.prefix, sys.base_prefix, sys.exec_prefix,
             os.path.dirname(os.path.realpath(sys.executable))]
    return [os.path.realpath(p) for p in found if p and os.path.isdir(p)]


def interpreter_dirs() -> list[str]:
    """What the child reads to run: the interpreter's prefixes, its executable's dir and
    ``sys.path``, and the tool and library dirs its environment names (compilers, CUDA)."""
    found = [*interpreter_prefixes(), *sys.path,
             *(os.environ.get(name, "") for name in _TOOL_DIRS)]
    for name in _SEARCH_PATHS:
        found += os.environ.get(name, "").split(os.pathsep)
    return [os.path.realpath(p) for p in found if p and os.path.isdir(p)]


def _binds(hide: Sequence[str], keep: Sequence[str], read: Sequence[str] = (),
           sealed: Sequence[str] = ()) -> list[tuple[str, bool]]:
    """(dir, writable) to bind back over the hidden places, outermost first; left out: a dir
    inside another of the same kind, a read-only one inside a writable one (the cwd is on
    ``sys.path``), and one that would uncover a hidden place. ``read`` is bound back
    read-only as named; inside a ``sealed`` place (the evaluator's source checkout) only
    ``read`` and the interpreter's own prefixes are, not every ``sys.path`` entry there."""
    prefixes = interpreter_prefixes()
    wanted = [(os.path.realpath(p), True) for p in keep if os.path.isdir(p)]
    wanted += [(os.path.realpath(p), False) for p in read if os.path.isdir(p)]
    wanted += [(p, False) for p in interpreter_dirs()
               if not any(under(p, s) for s in sealed) or any(under(p, x) for x in prefixes)]
    chosen: list[tuple[str, bool]] = []
    for path, writable in sorted(dict.fromkeys(wanted), key=lambda item: len(item[0])):
        if not any(under(path, h) for h in hide) or any(under(h, path) for h in hide):
            continue
        if not any(under(path, p) and (w == writable or w) for p, w in chosen):
            chosen.append((path, writable))
    return chosen


def _unshare(libc: ctypes.CDLL, own_ipc: bool, own_cgroup: bool = False) -> tuple[bool, str]:
    """Enter the new namespaces: (entered, why the view cannot be made private). With
    ``own_ipc`` an IPC namespace too: System V shared memory, semaphores and message queues
    the candidate makes die with it, and the host's are out of its reach (round 15: a
    segment made in one evaluation was written by the next, and outlived both). With
    ``own_cgroup`` a cgroup namespace rooted at the child's own cgroup (joined before): the
    kernel then refuses to move any of its processes to a cgroup outside it, by a write or by
    ``clone3(CLONE_INTO_CGROUP)``, which file permissions alone allowed to a uid that owns the
    cgroups (round 19)."""
    uid, gid = os.geteuid(), os.getegid()
    user = 0 if uid == 0 else CLONE_NEWUSER
    ipc = CLONE_NEWIPC if own_ipc else 0
    flags = CLONE_NEWPID | CLONE_NEWNS | ipc | user
    if not (own_cgroup and libc.unshare(flags | CLONE_NEWCGROUP) == 0) \
            and libc.unshare(flags) != 0:
        return False, f"unshare(PID and mount namespaces): {os.strerror(ctypes.get_errno())}"
    if user:
        try:
            for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"),
                               ("gid_map", f"{gid} {gid} 1")):
                Path(f"/proc/self/{name}").write_text(text)
        except OSError as exc:
            return True, f"user namespace mapping: {exc}"
    return True, ""


def _namespace_id(kind: str) -> str:
    try:
        return os.readlink(f"/proc/self/ns/{kind}")
    except OSError:
        return ""


def enter(plan: dict[str, list[str]]) -> Entered:
    """Move this child into its own namespaces (see the module docstring); returns in PID 1.
    Never raises: what could not be done is recorded in ``Entered.missing``."""
    lifetime.bind_to_parent()  # the watcher stays outside, where the candidate cannot signal it
    done = Entered()
    hide = [h for h in plan.get("hide", []) if h]
    try:
        mounts = _Mount()
    except (KeyError, OSError, AttributeError) as exc:
        done.missing[LAYER] = f"no mount syscalls here ({platform.machine()}: {exc})"
        return _gpus_left(plan, done, done.missing[LAYER])
    cgroup_ns = _namespace_id("cgroup")
    entered, why = _unshare(mounts.libc, plan.get("ipc") == ["own"],
                            plan.get("cgroupns") == ["own"])
    if plan.get("cgroupns") == ["own"]:
        own = _namespace_id("cgroup") not in ("", cgroup_ns)
        (done.layers if own else done.missing)["cgroup namespace"] = (
            "its cgroup is the root: no process of it can be moved out" if own else
            "not made: the owner of the cgroups may move a process out of the child's")
    if not entered:
        done.missing[LAYER] = why
        return _gpus_left(plan, done, why)
    trees: list[tuple[str, bool, int]] = []
    serve: dict[str, int] = {}
    try:
        if why:
            raise OSError(why)
        mounts.mount(None, "/", None, _MS_REC | _MS_PRIVATE)
        binds = _binds(hide, plan.get("keep", []), plan.get("read", []), plan.get("sealed", []))
        trees = [(p, w, _clone(mounts, p, w)) for p, w in binds]
        serve = {p: os.open(p, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
                 for p in plan.get("serve", []) if os.path.isdir(p)}
    except OSError as exc:  # nothing is hidden yet: PID 1 all the same, the view unchanged
        done.missing["private mounts"] = str(exc)
        _fork({}, [], -1)
        return _gpus_left(plan, done, str(exc))
    _fork(serve, trees, _owner(plan))
    _private_view(mounts, hide, set(plan.get("roomy", [])), trees, done)
    _hide_other_gpus(mounts, plan, done)
    _become_init(plan.get("control") or [], done)
    return done


def _gpus_left(plan: dict[str, list[str]], done: Entered, why: str) -> Entered:
    """No private view: the host's other GPUs, which the plan would have covered, stay."""
    if plan.get("gpu_nodes") or plan.get("gpu_why"):
        done.missing[gpu_view.LAYER] = (plan.get("gpu_why") or [
            f"the host's other GPUs stay reachable: no private mounts ({why})"])[0]
    return done


def _become_init(control: list[str], done: Entered) -> None:
    """In PID 1: fork the child's work as PID 2 and stay behind as the namespace's init, a
    trusted process that never runs candidate code. On the parent's word (one byte on the
    control pipe) it signals every other process of the namespace at once with
    ``kill(-1, ...)``: the kernel lets no fork slip past such a signal, so a chain of short-lived
    processes cannot outrun a stop as it can a scan of ``/proc``. It reaps orphans and, when
    PID 2 ends, kills the rest and exits as PID 2 did."""
    if len(control) != 2 or not all(str(fd).isdigit() for fd in control):
        return
    ctl, ack = (int(fd) for fd in control)
    worker = os.fork()
    if worker == 0:
        for fd in (ctl, ack):
            os.close(fd)
        done.layers["stops"] = "atomic (the namespace's own init signals every member)"
        return
    # its pipes out of reach through /proc/1/fd (landlock's ptrace scoping also keeps the
    # candidate out; this covers a kernel without landlock for a candidate that is not root)
    set_dumpable(False)
    _init_loop(worker, ctl, ack)


_INIT_SIGNALS = {b"S": signal.SIGSTOP, b"C": signal.SIGCONT, b"K": signal.SIGKILL}
LAST_PID = b"P"  # the order that asks for the namespace's last PID (8 bytes back, -1: unknown)
LAST_PID_BYTES = 8


def _last_pid() -> bytes:
    """The last PID the kernel gave out in this namespace (read in it, by its init): every
    thread and process created in the namespace, or in one nested in it, moves it, the ones
    that ended before anyone looked included. The members cannot set it: they hold no
    capability (``isolation.capabilities``)."""
    try:
        value = int(Path("/proc/sys/kernel/ns_last_pid").read_text())
    except (OSError, ValueError):
        value = -1
    return value.to_bytes(LAST_PID_BYTES, "little", signed=True)


def _init_loop(worker: int, ctl: int, ack: int) -> NoReturn:
    keep = sorted({ctl, ack} | ({_channel.request, _channel.ack} if _channel else set()))
    for fd in range(3, 1 << 16):
        if fd not in keep:
            with contextlib.suppress(OSError):
                os.close(fd)
    if _channel is not None:
        for fd in (_channel.request, _channel.ack):
            os.close(fd)
    while True:
        if ctl < 0:
            time.sleep(0.05)
        elif select.select([ctl], [], [], 0.05)[0]:
            command = os.read(ctl, 1)
            if command == LAST_PID:
                with contextlib.suppress(OSError):
                    os.write(ack, _last_pid())
                continue
            sig = _INIT_SIGNALS.get(command, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.kill(-1, sig)  # every process of the namespace but this one
            if not command:  # the parent closed the pipe: the end
                ctl = -1
            with contextlib.suppress(OSError):
                os.write(ack, b"k")
        while True:  # reap: orphans of the namespace come to its init
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                os._exit(1)
            if pid == 0:
                break
            if pid == worker:
                with contextlib.suppress(OSError):
                    os.kill(-1, signal.SIGKILL)
                os._exit(128 + os.WTERMSIG(status) if os.WIFSIGNALED(status)
                         else os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


def _clone(mounts: _Mount, path: str, writable: bool) -> int:
    tree = mounts.open_tree(_AT_FDCWD, path, _OPEN_TREE_CLONE | _OPEN_TREE_CLOEXEC | _AT_RECURSIVE)
    if not writable:
        with contextlib.suppress(OSError):  # landlock keeps it unwritten anyway
            mounts.read_only(tree)
    return tree


def _owner(plan: dict[str, list[str]]) -> int:
    """The uid the child's work runs as, to hand served dirs to (-1: leave them as they are)."""
    try:
        return int((plan.get("owner") or ["-1"])[0])
    except ValueError:
        return -1


def _fork(serve: dict[str, int], trees: list[tuple[str, bool, int]], owner: int) -> None:
    """Fork PID 1; the outer process stays in ``_outer`` until it exits."""
    global _channel
    request_r, request_w = os.pipe()
    ack_r, ack_w = os.pipe()
    pid = os.fork()
    if pid:
        _outer(pid, request_r, ack_w, serve, owner)
    for fd in (request_r, ack_w, *serve.values()):
        os.close(fd)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # the outer killed: the namespace
    if select.select([ack_r], [], [], 0)[0]:  # EOF: the outer died before the line above
        os._exit(1)
    if serve:
        _channel = _Channel(request_w, ack_r, tuple(serve))
    else:
        os.close(request_w)
        os.close(ack_r)


def _private_view(mounts: _Mount, hide: list[str], roomy: set[str],
                  trees: list[tuple[str, bool, int]], done: Entered) -> None:
    """In PID 1: the namespace's own /proc, the hidden places covered, own dirs bound back."""
    try:
        mounts.mount(b"proc", "/proc", b"proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
        done.layers[LAYER] = "own PID namespace and /proc"
    except OSError as exc:
        done.missing["own /proc"] = str(exc)
    else:
        try:
            _proc_read_only(mounts)
        except OSError as exc:
            done.missing["read-only /proc/sys"] = str(exc)
    try:
        for path in sorted(hide, key=len):
            _cover(mounts, path, hide, roomy)
        for path, _, tree in trees:
            os.makedirs(path, exist_ok=True)
            mounts.move_mount(tree, path)
        _mask_block_devices(mounts)
        done.layers["private mounts"] = (f"{len(hide)} shared places hidden, "
                                         f"{len(trees)} own dirs bound back")
    except OSError as exc:
        done.missing["private mounts"] = str(exc)
    finally:
        for _, _, tree in trees:
            with contextlib.suppress(OSError):
                os.close(tree)


# The host's knobs under /proc, read-only in the child's view as in every container runtime:
# a candidate that is uid 0 (CUDA jobs started as root) could otherwise set
# kernel.core_pattern to a program of its own, which the kernel runs as root (round 16).
PROC_READ_ONLY = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs")


def _mask_block_devices(mounts: _Mount) -> None:
    """Every block device node under ``/dev`` covered by ``/dev/null``: a uid-0 candidate
    (a CUDA job started as root) opens a disk by its mode alone (``root:disk 660``) and reads
    past every cover of the file system (round 16). Nothing a candidate needs is a block
    device; ``/dev/shm`` and the like are not walked."""
    for top, dirs, files in os.walk("/dev"):
        dirs[:] = [d for d in dirs if os.path.join(top, d) not in _DEV_SKIP]
        for name in files:
            path = os.path.join(top, name)
            with contextlib.suppress(OSError):
                if stat.S_ISBLK(os.lstat(path).st_mode):
                    mounts.mount(b"/dev/null", path, None, _MS_BIND)


_DEV_SKIP = frozenset({"/dev/shm", "/dev/pts", "/dev/mqueue", "/dev/hugepages"})


def _hide_other_gpus(mounts: _Mount, plan: dict[str, list[str]], done: Entered) -> None:
    """In PID 1: the host's other GPUs' nodes (``isolation.gpu_view``) covered by an empty
    file of mode 000, which the child, without capabilities, cannot open: CUDA leaves those
    GPUs out, as it does GPUs a device cgroup denies."""
    why, nodes = plan.get("gpu_why") or [], plan.get("gpu_nodes") or []
    if why:
        done.missing[gpu_view.LAYER] = why[0]
    if not nodes:
        return
    try:
        cover_nodes(mounts, nodes, (plan.get("roomy") or ["/tmp"])[0])
    except OSError as exc:
        done.missing[gpu_view.LAYER] = f"the host's other GPUs stay reachable: {exc}"
    else:
        done.layers[gpu_view.LAYER] = (plan.get("gpu_view") or ["other GPUs' nodes covered"])[0]


def cover_nodes(mounts: _Mount, nodes: Sequence[str], scratch: str) -> None:
    """Bind one empty file of mode 000, made in ``scratch`` (a tmpfs of the child's own) and
    unlinked again, over every path of ``nodes``."""
    blank = os.path.join(scratch, f".cudal1-covered-{os.getpid()}")
    os.close(os.open(blank, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_CLOEXEC, 0))
    try:
        os.chmod(blank, 0)
        for node in nodes:
            mounts.mount(blank.encode(), node, None, _MS_BIND)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(blank)


def _proc_read_only(mounts: _Mount) -> None:
    for path in PROC_READ_ONLY:
        if os.path.exists(path):
            mounts.mount(path.encode(), path, None, _MS_BIND | _MS_REC)
            mounts.mount(None, path, None, _MS_BIND | _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID |
                         _MS_NODEV | _MS_NOEXEC)


def _cover(mounts: _Mount, path: str, hide: list[str], roomy: set[str]) -> None:
    if any(under(path, h) and h != path for h in hide):
        os.makedirs(path, exist_ok=True)  # inside a tmpfs mounted just before
    elif not os.path.isdir(path):
        return
    options = _TMPFS_OPTS if path in roomy else _COVER_OPTS
    mounts.mount(b"tmpfs", path, b"tmpfs", _MS_NOSUID | _MS_NODEV, options)


def _outer(pid: int, request: int, ack: int, serve: dict[str, int], owner: int) -> NoReturn:
    """The original process: serve the one bind request, wait for PID 1, exit as it did."""
    keep = sorted({request, ack, *serve.values()})
    start = 3
    for fd in keep:  # the child's pipes close here: their EOF is PID 1's alone
        os.closerange(start, fd)
        start = fd + 1
    os.closerange(start, 1 << 16)
    line = _read_line(request)
    if line:
        with contextlib.suppress(OSError):
            os.write(ack, (_serve(line, serve, owner) or "ok").encode() + b"\n")
    _, status = os.waitpid(pid, 0)
    _exit_like(status)


def _read_line(fd: int) -> str:
    data = b""
    while not data.endswith(b"\n"):
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        data += chunk
    return data.decode("utf-8", "replace").strip()


def _serve(path: str, serve: dict[str, int], owner: int) -> str:
    """Bind ``root/src-<hash>`` (a cache of the plan's) at its path: "" or why not."""
    root, name = os.path.split(path)
    if root not in serve or not _SOURCE_DIR.fullmatch(name):
        return f"error: {path} is not a per-source dir of a served build cache"
    try:
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, 0o755, dir_fd=serve[root])
        _give(serve[root], name, owner)
        mounts = _Mount()
        tree = mounts.open_tree(serve[root], name, _OPEN_TREE_CLONE | _OPEN_TREE_CLOEXEC |
                                _AT_RECURSIVE)
        os.makedirs(path, exist_ok=True)
        mounts.move_mount(tree, path)
        os.close(tree)
    except OSError as exc:
        return f"error: {exc}"
    return ""


def _give(root_fd: int, name: str, owner: int) -> None:
    """A served dir belongs to the uid the child runs as (the plan's ``owner``), all of it:
    an earlier child may have run as another (CPU and GPU jobs share a build cache), and
    without capabilities a root child writes only where it owns."""
    if os.geteuid() != 0 or owner < 0:
        return
    fd = os.open(name, lifetime.OPEN_DIR, dir_fd=root_fd)
    try:
        os.fchown(fd, owner, owner)
        lifetime.give_tree(fd, owner, owner)
    finally:
        os.close(fd)


def _exit_like(status: int) -> NoReturn:
    if os.WIFEXITED(status) and 128 < os.WEXITSTATUS(status) < 160:
        sig = os.WEXITSTATUS(status) - 128  # the namespace's init cannot die of a signal:
        status = sig                        # it exits with 128 + the signal PID 2 died of
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        with contextlib.suppress(OSError, ValueError):
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


def after_job(job_path: str) -> str:
    """In a warm PID 1, once its job is written and before candidate code runs: have the
    outer process bind the job's per-source build dir. "" when done or not needed."""
    global _channel
    if _channel is None:
        return ""
    channel, _channel = _channel, None
    answer = _ask(channel, job_path)
    for fd in (channel.request, channel.ack):
        with contextlib.suppress(OSError):
            os.close(fd)
    return "" if answer == "ok" else answer or "error: no answer from the outer process"


def _ask(channel: _Channel, job_path: str) -> str:
    from cudal1_evaluator.parent.build_cache import build_root_of, source_dir

    try:
        job = json.loads(Path(job_path).read_text(encoding="utf-8"))
        root = build_root_of(job.get("build_dir") or None)
        if os.path.realpath(root) not in channel.roots:
            return "ok"  # a cache this child may write as it is (its temp dir's default one)
        wanted = source_dir(Path(os.path.realpath(root)), str(job.get("candidate_source", "")))
        os.write(channel.request, f"{wanted}\n".encode())
        return _read_line(channel.ack)
    except (OSError, ValueError, AttributeError) as exc:
        return f"error: {exc}"
