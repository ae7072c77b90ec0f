"""Process lifetime: evaluator children die with the process that started them, and what a
dead owner left behind is swept at the next start (stdlib only, Linux-first).

Parent side: every process that spawns evaluator children keeps one *watchdog pipe* open for
its whole life and hands the read end to each child (``watchdog_fd``, ``child_env``). Nobody
ever writes to it, so a child sees EOF exactly when the parent has died (``kill -9``
included), as the kernel closes the write end then.

Child side (``bind_to_parent``, first thing in ``python -m cudal1_evaluator _child``): it asks
for ``SIGKILL`` when its parent dies (``PR_SET_PDEATHSIG``), checks the parent did not die
before that request landed, then forks a small *watcher* into its own process group. The
watcher waits for EOF on the watchdog pipe (or for the child to end) and then kills the whole
session, so grandchildren (ninja, cc1plus, nvcc) go too: ``PR_SET_PDEATHSIG`` alone would
kill the child and leave them running, and ninja puts each compiler in a group of its own.

Leftovers: each ``cudal1-eval-*`` temp dir names its owner (pid and start time of the process
that made it) in its own name, so no kill can fall between making the dir and marking it.
``sweep_stale`` removes the dirs of dead owners and, when no live owner is left, torch's build
``lock`` files (a lock a killed build left makes every later build of the same code wait for it
until its timeout).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import os
import select
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from cudal1_evaluator.isolation import cgroup

ENV_VAR = "CUDAL1_LIFETIME"  # "<parent pid>:<watchdog fd>" in a child's environment
TEMP_PREFIX = "cudal1-eval-"
OWNER_FILE = ".owner"  # what older versions marked their dirs with
_PR_SET_PDEATHSIG = 1
_UNMARKED_GRACE_S = 3600.0  # a temp dir without a marker (older versions): swept after this
_STALE_LOCK_S = 6 * 3600.0  # a build lock older than any evaluation's time limit
_watchdog: tuple[int, int] | None = None


# -- who owns what ---------------------------------------------------------------------------

def start_time(pid: int) -> str:
    """The process's start time in clock ticks since boot ("" when it does not exist): with the
    pid it names one process, never a later one that reused the pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes().decode("ascii", "replace")
    except OSError:
        return "" if _proc_available() else _exists_marker(pid)
    return stat.rsplit(")", 1)[1].split()[19]


def _proc_available() -> bool:
    return Path("/proc/self/stat").exists()


def _exists_marker(pid: int) -> str:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return ""
    except PermissionError:
        pass
    return "?"


def owner_token(pid: int | None = None) -> str:
    pid = os.getpid() if pid is None else pid
    return f"{pid} {start_time(pid)}"


def owner_alive(token: str) -> bool:
    """Whether the process a token names (``owner_token``) is still running."""
    parts = token.split()
    if len(parts) != 2 or not parts[0].isdigit():
        return False
    now = start_time(int(parts[0]))
    return bool(now) and (now == parts[1] or "?" in (now, parts[1]))


def make_owned_temp_dir(base: Path | None = None) -> Path:
    """A fresh ``cudal1-eval-*`` dir in ``base`` (the temp dir by default) whose name carries
    this process's token: a process killed right after ``mkdtemp`` leaves a dir the next start
    can still attribute."""
    pid, _, start = owner_token().partition(" ")
    return Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{pid}_{start or 'x'}_",
                                 dir=None if base is None else str(base)))


OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
GIVE_DEPTH = 64  # deeper than any build tree; below it nothing is handed over


def give_tree(fd: int, uid: int, gid: int, depth: int = 1) -> None:
    """chown everything beneath the open dir ``fd`` to ``uid``, by directory descriptors and
    never through a link: an earlier candidate owns what is in a shared build dir, and a dir
    it swaps for a link to ``/etc`` between a look and a walk must not hand ``/etc`` over.
    The whole tree is walked: trusted processes, still root, add to a dir handed over."""
    with os.scandir(fd) as entries:
        listed = list(entries)
    for entry in listed:
        try:
            info = entry.stat(follow_symlinks=False)
            if info.st_uid != uid:
                os.chown(entry.name, uid, gid, dir_fd=fd, follow_symlinks=False)
            elif stat.S_ISREG(info.st_mode) and info.st_mode & (stat.S_ISUID | stat.S_ISGID):
                _clear_set_id(fd, entry.name)  # a chown clears them; one not needed did not
        except (FileNotFoundError, NotADirectoryError):
            continue  # removed since it was listed (a build's temp file)
        if stat.S_ISDIR(info.st_mode) and depth < GIVE_DEPTH:
            try:
                sub = os.open(entry.name, OPEN_DIR, dir_fd=fd)
            except OSError:
                continue  # gone, or swapped for a link since it was listed
            try:
                give_tree(sub, uid, gid, depth + 1)
            finally:
                os.close(sub)


def _clear_set_id(dir_fd: int, name: str) -> None:
    """Drop the set-uid and set-gid bits of a regular file an earlier candidate left (a set-uid
    root binary in a shared cache), through an fd: never a link's target."""
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        info = os.fstat(fd)
        if stat.S_ISREG(info.st_mode):
            os.fchmod(fd, stat.S_IMODE(info.st_mode) & ~(stat.S_ISUID | stat.S_ISGID))
    finally:
        os.close(fd)


def give_dir(path: Path, uid: int, *, whole: bool = True) -> None:
    """chown the dir ``path`` to ``uid`` (and all beneath it, ``whole``), never through a link."""
    if path.is_symlink() or not path.is_dir():
        return
    top = os.open(path, OPEN_DIR)
    try:
        os.fchown(top, uid, uid)
        if whole:
            give_tree(top, uid, uid)
    finally:
        os.close(top)


def give_to_owner_of(fd_or_path: int | Path, directory: Path | int) -> None:
    """Hand what a trusted process (root) made in a child's dir (a path, or an open fd) to
    that dir's owner: a child that runs as its own uid must open it as it would its own."""
    if os.geteuid() != 0:
        return
    owner = os.fstat(directory) if isinstance(directory, int) else os.lstat(directory)
    if owner.st_uid == 0:
        return
    if isinstance(fd_or_path, int):
        os.fchown(fd_or_path, owner.st_uid, owner.st_gid)
    else:
        os.lchown(fd_or_path, owner.st_uid, owner.st_gid)


def open_dir_no_links(path: Path) -> int:
    """An fd of the dir ``path``, reached without following a link at any step: a child may
    swap a dir of its own for a link between the moment a trusted process names it and the
    moment it writes there, and ``O_NOFOLLOW`` alone guards only the last step. Above an
    evaluation's own dir (``TEMP_PREFIX``), a link in a dir only root may write is the
    system's (``/dev/shm`` -> ``/run/shm`` on some hosts) and is followed; below it, none."""
    fd, inside = os.open(os.sep, OPEN_DIR), False
    try:
        for part in Path(os.path.abspath(path)).parts[1:]:
            try:
                sub = os.open(part, OPEN_DIR, dir_fd=fd)
            except OSError as exc:
                held = os.fstat(fd)
                if inside or exc.errno not in (errno.ELOOP, errno.ENOTDIR) or \
                        held.st_uid != 0 or held.st_mode & 0o022:
                    raise
                sub = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)
            inside = inside or part.startswith(TEMP_PREFIX)
            os.close(fd)
            fd = sub
    except BaseException:
        os.close(fd)
        raise
    return fd


SHM_DIR = Path("/dev/shm")
SHM_MIN_FREE = 2 << 30


@functools.cache
def exchange_base() -> Path | None:
    """Where the referee and the worker share host tensors: a memory file system with 2 GiB
    free (``/dev/shm``), decided once a process; None (the child's own temp dir) without one,
    or when ``TMPDIR`` names a place. The shared tensors are files: on a disk file system the
    kernel's writeback and journal ran beside the timed calls, and the reference timed next to
    the candidate came out about 10 % slower than alone on a 2-core VM (the same on tmpfs)."""
    if os.environ.get("TMPDIR"):
        return None
    try:
        free = os.statvfs(SHM_DIR)
    except OSError:
        return None
    if free.f_bavail * free.f_frsize < SHM_MIN_FREE or not os.access(SHM_DIR, os.W_OK | os.X_OK):
        return None
    return SHM_DIR


def _token_in_name(path: Path) -> str | None:
    pid, _, rest = path.name.removeprefix(TEMP_PREFIX).partition("_")
    start, _, _ = rest.partition("_")
    return f"{pid} {start}" if pid.isdigit() and start and start != "x" else None


# -- parent side -----------------------------------------------------------------------------

def watchdog_fd() -> int:
    """The read end of this process's watchdog pipe (made once; the write end stays open
    until the process dies and is never inherited by a child)."""
    global _watchdog
    if _watchdog is None:
        _watchdog = os.pipe()
    return _watchdog[0]


def child_env() -> dict[str, str]:
    """What a child's environment needs for ``bind_to_parent``; pass ``watchdog_fd()`` too."""
    return {ENV_VAR: f"{os.getpid()}:{watchdog_fd()}"}


# -- child side ------------------------------------------------------------------------------

def _set_parent_death_signal(signum: int) -> None:
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0)


def bind_to_parent() -> None:
    """In a child, before anything else: die with the parent, and take the group along."""
    value = os.environ.pop(ENV_VAR, "")
    parent_text, _, fd_text = value.partition(":")
    if not (parent_text.isdigit() and fd_text.isdigit()):
        return
    parent, fd = int(parent_text), int(fd_text)
    _set_parent_death_signal(signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before the request above took effect
        os._exit(1)
    if os.getsid(0) != os.getpid():
        return  # not a session leader: killing "our" session would hit someone else's
    if os.fork() == 0:
        _watch(fd, parent_of_watcher=os.getppid())
    os.close(fd)


def _watch(fd: int, parent_of_watcher: int) -> None:
    """The watcher: wait until the app dies (EOF) or the child ends, then kill the group.
    It leaves the child's process group (not its session): the parent stops and resumes a
    child by its group, and a watcher stopped with it when the app died stayed stopped for
    ever."""
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)
    with contextlib.suppress(OSError):
        os.closerange(3, fd)
        os.closerange(fd + 1, 1 << 16)
    try:
        while os.getppid() == parent_of_watcher:
            ready, _, _ = select.select([fd], [], [], 0.5)
            if ready and not os.read(fd, 1):
                break
    finally:
        kill_session(os.getsid(0))
        os._exit(0)


def _session_members(sid: int) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                # bytes: a process names itself, and the name need not be UTF-8
                fields = (entry / "stat").read_bytes().decode("ascii", "replace") \
                    .rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if len(fields) > 3 and fields[3] == str(sid):
                members.append(int(entry.name))
    return members


def kill_session(sid: int) -> None:
    """SIGKILL every process of session ``sid`` (a child's, made with ``start_new_session``).

    Its process group is not enough: ninja starts each compiler in a process group of its
    own, and those outlived a killed build. The caller, when it is a member, goes last."""
    me = os.getpid()
    if os.getpgrp() != sid:  # (a member would kill itself before it found the rest)
        with contextlib.suppress(OSError):
            os.killpg(sid, signal.SIGKILL)
    for _ in range(3):  # a process forking while we look is caught on a later pass
        members = [pid for pid in _session_members(sid) if pid != me]
        if not members:
            break
        for pid in members:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    if os.getsid(0) == sid:
        os.kill(me, signal.SIGKILL)


# -- sweeping leftovers ----------------------------------------------------------------------

@dataclass
class Swept:
    """What ``sweep_stale`` removed, and which live owners kept their files."""

    temp_dirs: list[str] = field(default_factory=list)
    locks: list[str] = field(default_factory=list)
    live_owners: list[str] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)

    def summary(self) -> str:
        parts = []
        if self.temp_dirs:
            parts.append(f"{len(self.temp_dirs)} evaluator temp dir(s)")
        if self.locks:
            parts.append(f"{len(self.locks)} build lock(s)")
        if self.groups:
            parts.append(f"{len(self.groups)} cgroup(s)")
        return ("removed what a killed run left: " + ", ".join(parts)) if parts else ""


SANDBOX_UID = 65534  # who a child started as root runs as (confine's); its dirs are its own


def _temp_dirs(temp_root: Path) -> list[Path]:
    uid = os.getuid()
    ours = {uid, SANDBOX_UID} if uid == 0 else {uid}
    out = []
    for path in temp_root.glob(TEMP_PREFIX + "*"):
        with contextlib.suppress(OSError):
            if path.is_dir() and not path.is_symlink() and path.stat().st_uid in ours:
                out.append(path)
    return out


def _owner_of(path: Path) -> str | None:
    """The marker's token, else the one in the dir's name; None for an older version's dir.
    The dir may be a child's: the marker is read as a regular file, through no link, 256
    bytes at most (a FIFO there would hang the sweep, a link to ``/dev/zero`` fill it)."""
    try:
        fd = os.open(path / OWNER_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK |
                     os.O_CLOEXEC)
    except OSError:
        return _token_in_name(path)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return _token_in_name(path)
        return os.read(fd, 256).decode("utf-8", "replace").strip()
    except OSError:
        return _token_in_name(path)
    finally:
        os.close(fd)


def _age_s(path: Path) -> float:
    try:
        return time.time() - path.stat().st_mtime
    except OSError:
        return 0.0


def sweep_temp_dirs(temp_root: Path, swept: Swept) -> None:
    mine = owner_token()
    for path in _temp_dirs(temp_root):
        token = _owner_of(path)
        if token is None:
            dead = _age_s(path) > _UNMARKED_GRACE_S
        elif token == mine or owner_alive(token):  # ours too: a child of ours may build
            if token not in swept.live_owners:
                swept.live_owners.append(token)
            continue
        else:
            dead = True
        if dead:
            remove_tree(path)
            if not path.exists():
                swept.temp_dirs.append(str(path))


def _lock_files(build_root: Path) -> list[Path]:
    found: list[Path] = []
    for pattern in ("*/torch_extensions/*/lock", "*/torch_extensions/*/*/lock",
                    "*/*/torch_extensions/*/lock", "*/*/torch_extensions/*/*/lock"):
        with contextlib.suppress(OSError):
            found += [p for p in build_root.glob(pattern) if p.is_file()]
    return found


def sweep_build_locks(build_root: Path, swept: Swept) -> None:
    """Locks are only held by evaluator children, and each lives under a parent whose temp dir
    is marked: with no live owner besides us, every lock is a dead build's."""
    nobody_else = not swept.live_owners
    for lock in _lock_files(build_root):
        with contextlib.suppress(OSError, ValueError):
            if _unlink_below(build_root, lock, None if nobody_else else _STALE_LOCK_S):
                swept.locks.append(str(lock))


def _unlink_below(root: Path, path: Path, older_than_s: float | None) -> bool:
    """Remove the regular file ``path`` under ``root``, reached by dir fds through no link: the
    dirs between are candidates' (a build dir's ``torch_extensions`` swapped for a link to
    ``/var/lib`` had root unlink ``dpkg/lock``: round 17). True when it was removed."""
    parts = path.relative_to(root).parts
    fd = os.open(root, OPEN_DIR)
    try:
        for part in parts[:-1]:
            sub = os.open(part, OPEN_DIR, dir_fd=fd)
            os.close(fd)
            fd = sub
        info = os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
        if not stat.S_ISREG(info.st_mode):
            return False
        if older_than_s is not None and time.time() - info.st_mtime <= older_than_s:
            return False
        os.unlink(parts[-1], dir_fd=fd)
        return True
    finally:
        os.close(fd)


def sweep_stale(build_roots: list[Path], temp_root: Path | None = None) -> Swept:
    """At start-up, before any child of ours runs: the temp dirs of dead owners, then the
    build locks nobody alive can hold."""
    swept = Swept()
    sweep_temp_dirs(temp_root or Path(tempfile.gettempdir()), swept)
    shared = exchange_base()
    if temp_root is None and shared is not None:
        sweep_temp_dirs(shared, swept)
    for root in dict.fromkeys(build_roots):
        sweep_build_locks(root, swept)
    swept.groups = cgroup.sweep(TEMP_PREFIX, _group_owner_alive)
    return swept


def _group_owner_alive(name: str) -> bool:
    """A child's cgroup is named as its temp dir: by the token of the process that made it."""
    token = _token_in_name(Path(name))
    return token is None or owner_alive(token)


def remove_tree(path: Path) -> None:
    """A dir a candidate wrote into, removed whatever it made there. ``rm -rf`` walks a tree of
    any depth and path length; ``shutil.rmtree`` recurses, and a tree deeper than Python's
    recursion limit raised out of the cleanup (round 13: an evaluation turned "cancelled" and
    its tree stayed on disk). Never raises."""
    if not os.path.lexists(path):
        return
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run(["rm", "-rf", "--", os.fspath(path)], check=False, timeout=300,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    if os.path.lexists(path):
        with contextlib.suppress(Exception):
            shutil.rmtree(path, ignore_errors=True)
