"""Which local processes serve a TCP port, read from ``/proc`` (Linux).

``/proc/net/tcp`` and ``tcp6`` list the listening sockets with their inode; each process's
``fd/`` links name the sockets it holds (``socket:[INODE]``). A model server often serves the
port from one process and holds the GPU from its children (vLLM's engine core, SGLang's
schedulers, Ollama's runners), so the whole family under the listener counts. ``root`` is
``/proc`` except in tests, which build the same layout in a temporary folder.
"""

from __future__ import annotations

import os
from pathlib import Path

PROC = Path("/proc")
LISTEN = "0A"


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def listening_inodes(port: int, root: Path = PROC) -> set[int]:
    """The inodes of the sockets listening on ``port`` (any address, IPv4 or IPv6)."""
    inodes: set[int] = set()
    for table in ("tcp", "tcp6"):
        for line in _read(root / "net" / table).splitlines()[1:]:
            cells = line.split()
            if len(cells) < 10 or cells[3] != LISTEN:
                continue
            _, _, port_hex = cells[1].rpartition(":")
            if int(port_hex, 16) == port and cells[9].isdigit():
                inodes.add(int(cells[9]))
    inodes.discard(0)
    return inodes


def _pids(root: Path) -> list[int]:
    try:
        return [int(entry.name) for entry in root.iterdir() if entry.name.isdigit()]
    except OSError:
        return []


def _sockets(pid: int, root: Path) -> set[int]:
    fds = root / str(pid) / "fd"
    found: set[int] = set()
    try:
        names = os.listdir(fds)
    except OSError:
        return found  # gone, or another user's process
    for name in names:
        try:
            target = os.readlink(fds / name)
        except OSError:
            continue
        if target.startswith("socket:[") and target.endswith("]"):
            found.add(int(target[8:-1]))
    return found


def owners(inodes: set[int], root: Path = PROC) -> set[int]:
    """The processes holding any of ``inodes`` (only those whose fds we may read)."""
    if not inodes:
        return set()
    return {pid for pid in _pids(root) if _sockets(pid, root) & inodes}


def parent_of(pid: int, root: Path = PROC) -> int | None:
    """The parent from ``/proc/PID/stat`` (the name in parentheses may hold anything)."""
    stat = _read(root / str(pid) / "stat")
    _, _, rest = stat.rpartition(")")
    cells = rest.split()
    return int(cells[1]) if len(cells) > 1 and cells[1].isdigit() else None


def descendants(pids: set[int], root: Path = PROC) -> set[int]:
    """``pids`` and every process below them."""
    children: dict[int, list[int]] = {}
    for pid in _pids(root):
        parent = parent_of(pid, root)
        if parent is not None:
            children.setdefault(parent, []).append(pid)
    family, todo = set(pids), list(pids)
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in family:
                family.add(child)
                todo.append(child)
    return family


def command_line(pid: int, root: Path = PROC) -> str:
    """The process's command line, space-separated ("" when unreadable)."""
    return _read(root / str(pid) / "cmdline").replace("\0", " ").strip()


def listeners(port: int, root: Path = PROC) -> set[int]:
    """The processes listening on ``port`` here."""
    return owners(listening_inodes(port, root), root)


def ours_not_serving(servers: set[int], pid: int, root: Path = PROC) -> set[int]:
    """``pid`` and the processes below it, less any of the ``servers`` (listener pids) among
    them and those servers' own processes: with the server above ``pid`` (a benchmark
    serving replies while it runs the app) its family holds the app's evaluator children,
    which are not the server's; with the server below ``pid`` (a script that started it)
    the server is."""
    ours = descendants({pid}, root)
    below = servers & ours
    return ours - descendants(below, root) if below else ours
