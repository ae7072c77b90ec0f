"""One control group per child: memory and tasks counted by the kernel (stdlib only, Linux).

A limit the child's process applies to itself (``RLIMIT_AS``) or one the parent reads from
``/proc`` (resident memory) misses memory no mapping holds: a candidate kept 6 GB of ``memfd``
and SysV pages past a 4 GB limit (round 17). A memory cgroup charges every page its processes
allocate, shared memory and tmpfs files included, and the kernel kills inside the group when
it is full. Its ``pids`` counter caps the tasks of this child alone, whatever uid it runs as.

The parent makes the group under its own (cgroup v2 when the memory controller is there,
else the v1 ``memory`` and ``pids`` hierarchies; in v2 the processes of its cgroup first move
to a leaf, ``cudal1-app``, as v2 hands controllers only to the children of a cgroup with no
process of its own) and sets the limits; the child joins it first
thing, before it forks or confines itself (``join``), and the parent moves it too, in case
the child cannot write there (a read-only ``/sys`` under bubblewrap). After joining, the
child's own sandbox keeps it from writing any cgroup file (landlock: ``/sys`` is not among its
writable dirs), so it cannot leave. Where no group can be made (cgroup v2 without delegation,
a read-only ``/sys``) the child runs as before and its confinement report says why.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

CONTROLLERS = ("memory", "pids")
LAYER = "cgroup"
APP_LEAF = "cudal1-app"  # v2: where the processes of the app's cgroup move (``_enable_v2``)
_KILL_ROUNDS = 20


@dataclass(frozen=True)
class _Hierarchy:
    """Where a hierarchy is mounted, the cgroup of this process in it, and its controllers."""

    mount: Path
    own: str  # this process's cgroup path in the hierarchy
    root: str  # the part of the hierarchy the mount shows
    controllers: tuple[str, ...]  # v1's (v2's are read where they are used)
    v2: bool

    def own_dir(self) -> Path | None:
        if ".." in self.own.split("/"):  # outside this namespace's root
            return None
        if not (self.own == self.root or self.own.startswith(self.root.rstrip("/") + "/")):
            return None
        return self.mount / self.own[len(self.root):].lstrip("/")


def _own_paths() -> dict[str, str]:
    """Controller (``""`` for v2) -> this process's cgroup path, from ``/proc/self/cgroup``."""
    paths: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, names, path = line.split(":", 2)
            for name in names.split(",") if names else [""]:
                paths[name] = path
    return paths


def _hierarchies() -> list[_Hierarchy]:
    own = _own_paths()
    found: list[_Hierarchy] = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            fields = line.split()
            sep = fields.index("-")
            fstype, options = fields[sep + 1], fields[sep + 3].split(",")
            mount, root = Path(fields[4]), fields[3]
            if fstype == "cgroup2" and "" in own:  # its controllers: the app's cgroup's own
                found.append(_Hierarchy(mount, own[""], root, (), True))
            elif fstype == "cgroup":
                names = tuple(c for c in CONTROLLERS if c in options)
                if any(h.controllers == names for h in found):
                    continue  # the same hierarchy mounted again
                if names and names[0] in own:
                    found.append(_Hierarchy(mount, own[names[0]], root, names, False))
    return found


def _choose() -> list[_Hierarchy]:
    """The v2 hierarchy when it has the memory controller, else the v1 ones that do."""
    hierarchies = _hierarchies()
    unified = [h for h in hierarchies if h.v2 and "memory" in _controllers_here(h)]
    return unified[:1] or [h for h in hierarchies if not h.v2]


@functools.cache
def _bases() -> tuple[tuple[Path | None, bool], ...]:
    """(the dir children's groups are made in, or None when this process's cgroup is not under
    the mount; v2?) for each hierarchy used, found once: in v2 the app may move itself into a
    leaf below its cgroup (``_into_leaf``), and its own cgroup is that leaf after."""
    return tuple((_base_dir(hierarchy), hierarchy.v2) for hierarchy in _choose())


def _base_dir(hierarchy: _Hierarchy) -> Path | None:
    """The app's cgroup dir in the hierarchy: its own, or in v2 the one above the leaf an
    earlier start of ours moved it to."""
    base = hierarchy.own_dir()
    if base is not None and hierarchy.v2 and base.name == APP_LEAF:
        return base.parent
    return base


def _controllers_here(hierarchy: _Hierarchy) -> list[str]:
    """The v2 controllers the app's cgroup has (a parent may not hand all down)."""
    base = _base_dir(hierarchy)
    return _read(base / "cgroup.controllers").split() if base is not None else []


def _write(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _counter(text: str, name: str) -> int:
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == name and value.strip().isdigit():
            return int(value)
    return 0


class Group:
    """The cgroup dirs of one child (one in v2, one per v1 hierarchy)."""

    def __init__(self, dirs: list[Path], v2: bool) -> None:
        self.dirs, self.v2 = dirs, v2

    @classmethod
    def make(cls, name: str) -> tuple[Group | None, str]:
        """(the group, "") or (None, why none could be made) for a child named ``name``."""
        bases = _bases()
        if not bases:
            return None, "no cgroup hierarchy with a memory controller is mounted"
        v2 = bases[0][1]
        made: list[Path] = []
        try:
            for base, _ in bases:
                if base is None:
                    raise OSError("this process's cgroup is not under the hierarchy's mount")
                if v2:
                    _enable_v2(base)
                (base / name).mkdir(mode=0o755)  # one that exists is not ours: never cleaned
                made.append(base / name)
        except OSError as exc:
            cls(made, v2).remove()
            return None, f"cannot make a cgroup here: {exc}"
        return cls(made, v2), ""

    @property
    def procs_files(self) -> list[str]:
        return [str(d / "cgroup.procs") for d in self.dirs]

    def _file(self, v2: str, v1: str) -> Path | None:
        for d in self.dirs:
            path = d / (v2 if self.v2 else v1)
            if path.exists():
                return path
        return None

    def tasks_limit(self) -> int | None:
        """The group's task cap as the kernel holds it (None: no pids controller, or none)."""
        path = self._file("pids.max", "pids.max")
        text = _read(path).strip() if path is not None else ""
        return int(text) if text.isdigit() else None

    def limit(self, memory_mb: int | None, tasks: int | None) -> bool:
        """Set the limits (again, when a warm child gets its job's); None leaves one as is.
        False when the memory limit does not hold after (v1 refuses one below the group's use:
        a warm child past its job's limit)."""
        if memory_mb is not None:
            size = str(memory_mb * 2**20)
            # v1 limits memory and swap together (and memory may not pass memory+swap: set
            # before and after, whichever way the limit moves); v2 counts swap apart (none:
            # it would be memory past the limit)
            self._set("memory.max", "memory.limit_in_bytes", size)
            self._set("memory.swap.max", "memory.memsw.limit_in_bytes", "0" if self.v2 else size)
            self._set("memory.max", "memory.limit_in_bytes", size)
            if self.v2:  # the whole group goes when one of it is killed for memory
                self._set("memory.oom.group", "", "1")
            else:  # no swap for the group where v1 counts none (swap accounting off)
                self._set("", "memory.swappiness", "0")
        if tasks is not None:
            self._set("pids.max", "pids.max", str(tasks))
        return memory_mb is None or self.memory_limit() == memory_mb * 2**20

    def _set(self, v2: str, v1: str, value: str) -> None:
        path = self._file(v2, v1) if (v2 if self.v2 else v1) else None
        if path is not None:
            with contextlib.suppress(OSError):
                _write(path, value)

    def add(self, pid: int) -> bool:
        """Move ``pid`` into every dir of the group; False when one refused."""
        ok = True
        for procs in self.procs_files:
            try:
                _write(Path(procs), str(pid))
            except OSError:
                ok = False
        return ok

    def memory_limit(self) -> int | None:
        path = self._file("memory.max", "memory.limit_in_bytes")
        text = _read(path).strip() if path is not None else ""
        return int(text) if text.isdigit() else None

    def oom_kills(self) -> int:
        """How many processes the kernel killed in the group for want of memory."""
        path = self._file("memory.events", "memory.oom_control")
        return _counter(_read(path), "oom_kill") if path is not None else 0

    def members(self) -> list[int]:
        pids: set[int] = set()
        for procs in self.procs_files:
            pids.update(int(p) for p in _read(Path(procs)).split() if p.isdigit())
        return sorted(pids)

    def kill_all(self) -> None:
        """SIGKILL every process in the group until it is empty (or stays not empty)."""
        kill_file = self.dirs[0] / "cgroup.kill" if self.v2 and self.dirs else None
        for _ in range(_KILL_ROUNDS):
            members = self.members()
            if not members:
                return
            if kill_file is not None and kill_file.exists():
                with contextlib.suppress(OSError):
                    _write(kill_file, "1")
            self._kill_members(members)
            time.sleep(0.01)

    def _kill_members(self, pids: list[int]) -> None:
        """SIGKILL each of ``pids`` only while it is still a member: a pid read from
        ``cgroup.procs`` may have ended and been reused by a host process since. A pidfd holds
        one process; a member after the pidfds were opened is that process (or a new member:
        one to kill too)."""
        held: dict[int, int] = {}
        for pid in pids:
            with contextlib.suppress(OSError):
                held[pid] = os.pidfd_open(pid)
        still = set(self.members())
        for pid, fd in held.items():
            with contextlib.suppress(OSError):
                if pid in still:
                    signal.pidfd_send_signal(fd, signal.SIGKILL)
            os.close(fd)

    def remove(self) -> None:
        """Kill what is left and remove the dirs (a group with a process in it stays)."""
        self.kill_all()
        for d in self.dirs:
            for _ in range(50):  # a killed process leaves the group when it is reaped
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)


def _enable_v2(base: Path) -> None:
    """Let ``base``'s children have memory and pids controllers. v2 lets a cgroup other than
    the root hand controllers to children only while it holds no process itself, so the
    processes in it (the app's, and a container's others) first move to a leaf below it, as
    container inits do: their limits are ``base``'s still."""
    enabled = _read(base / "cgroup.subtree_control").split()
    offered = _read(base / "cgroup.controllers").split()  # asking for one not offered fails all
    wanted = " ".join(f"+{c}" for c in CONTROLLERS if c not in enabled and c in offered)
    if not wanted:
        return
    try:
        _write(base / "cgroup.subtree_control", wanted)
    except OSError as exc:
        if exc.errno != errno.EBUSY:
            raise
        if not _ours_to_divide(base):
            raise OSError(errno.EBUSY, "the app's cgroup (v2) holds processes and is not "
                          "delegated to it: run it in a container, or under systemd with "
                          "systemd-run --scope -p Delegate=yes") from exc
        _into_leaf(base)
        _write(base / "cgroup.subtree_control", wanted)


def _ours_to_divide(base: Path) -> bool:
    """May the app move the processes of its cgroup into a leaf? Only in the root of its
    cgroup namespace (a container's own cgroup) or in a cgroup delegated to it (systemd marks
    those): a unit systemd manages without delegation is not to be divided."""
    if _own_paths().get("", "") in ("/", "/" + APP_LEAF):
        return True
    for name in ("trusted.delegate", "user.delegate"):
        with contextlib.suppress(OSError):
            if os.getxattr(base, name) == b"1":
                return True
    return False


def _into_leaf(base: Path) -> None:
    leaf = base / APP_LEAF
    leaf.mkdir(mode=0o755, exist_ok=True)
    for _ in range(5):  # a process forked while they move lands in base: moved next time
        pids = _read(base / "cgroup.procs").split()
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(OSError):  # ended since, or a kernel thread
                _write(leaf / "cgroup.procs", pid)


def join(procs_files: list[str]) -> tuple[bool, str]:
    """In the child, first thing: move this process into its group (the parent may have done
    so already). (joined?, what holds or why not)."""
    me = str(os.getpid())
    problems = []
    for procs in procs_files:
        with contextlib.suppress(OSError):
            _write(Path(procs), me)
        if me not in _read(Path(procs)).split():
            problems.append(procs)
    if problems:
        return False, f"not in its cgroup ({', '.join(problems)})"
    return True, "own cgroup: memory (shared memory and tmpfs counted) and tasks"


def sweep(prefix: str, owner_alive: Callable[[str], bool]) -> list[str]:
    """The groups a dead owner left (names ``prefix`` + its token, as temp dirs are named):
    their processes killed, the dirs removed. ``owner_alive(name) -> bool``."""
    removed: list[str] = []
    for base, v2 in _bases():
        if base is None:
            continue
        with contextlib.suppress(OSError):
            for entry in base.iterdir():
                if entry.name.startswith(prefix) and entry.is_dir() \
                        and not owner_alive(entry.name):
                    Group([entry], v2).remove()
                    if not entry.exists():
                        removed.append(str(entry))
    return removed
