"""The start of every evaluator child: refuse to run on a tampered interpreter, then confine.

The attack: native code (POSIX ``open``/``write`` from a ``load_inline`` source, invisible to
the audit hook) plants a ``.pth`` file in site-packages, or edits ``sitecustomize`` or the
evaluator itself, and so patches every later process. The parent hashes those files once per
process (``record``) and writes the manifest next to the job; the child starts with ``python
-S`` (no ``.pth`` has run yet), compares (``child_start``), and only then runs ``site.main()``
and confines itself (``cudal1_evaluator.isolation.confine``). Stdlib only.
"""

from __future__ import annotations

import hashlib
import json
import os
import site
import sys
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:
    from cudal1_evaluator.isolation.confine import Confinement

CONFIG_NAME = "sandbox.json"  # next to the job file, written by the parent
EXIT_SETUP = 78  # EX_CONFIG: the child refused to start
_CUSTOMIZE = ("sitecustomize.py", "usercustomize.py", "sitecustomize", "usercustomize")


def _site_dirs() -> list[str]:
    prefixes = _venv_prefixes() if sys.flags.no_site else None
    dirs = [*site.getsitepackages(prefixes), site.getusersitepackages()]
    return [os.path.realpath(d) for d in dict.fromkeys(dirs) if d]


def _venv_prefixes() -> list[str] | None:
    """The prefixes ``site.main()`` will use, read from a venv's ``pyvenv.cfg`` without running
    ``site`` (its ``venv()`` already processes ``.pth`` files). Under ``-S`` ``sys.prefix`` is
    still the base interpreter's, whose site dirs a venv does not use."""
    exe_dir = os.path.dirname(os.path.abspath(sys.executable))
    for conf in (Path(exe_dir) / "pyvenv.cfg", Path(exe_dir).parent / "pyvenv.cfg"):
        if conf.is_file():
            settings = dict(line.split("=", 1) for line in
                            conf.read_text(encoding="utf-8", errors="replace").splitlines()
                            if "=" in line)
            system = {k.strip().lower(): v.strip().lower() for k, v in settings.items()}.get(
                "include-system-site-packages") == "true"
            venv = os.path.dirname(exe_dir)
            return [venv, sys.base_prefix] if system else [venv]
    return None


def _path_dirs(python_path: str) -> list[str]:
    return [os.path.realpath(p) for p in python_path.split(os.pathsep) if p]


def _hash(path: Path) -> str:
    try:
        if path.is_dir():
            parts = sorted(p for p in path.rglob("*.py"))
            return hashlib.sha256(b"".join(_hash(p).encode() for p in parts)).hexdigest()
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        return f"unreadable: {exc.strerror}"


def _evaluator_dir() -> Path:
    return Path(__file__).resolve().parents[1]


class StartupRecord(TypedDict):
    """The parent's record of the interpreter's files, which a child checks at its start."""

    dirs: list[str]
    files: dict[str, str]  # path -> digest (see ``manifest``)


def manifest(dirs: list[str]) -> dict[str, str]:
    """path -> sha256 of every ``.pth`` file and ``site``/``usercustomize`` in ``dirs``, and of
    the evaluator's own source files."""
    found: dict[str, str] = {}
    for directory in dict.fromkeys(dirs):
        base = Path(directory)
        if not base.is_dir():
            continue
        for path in sorted(base.glob("*.pth")):
            found[str(path)] = _hash(path)
        for name in _CUSTOMIZE:
            if (base / name).exists():
                found[str(base / name)] = _hash(base / name)
    for path in sorted(_evaluator_dir().rglob("*.py")):
        found[str(path)] = _hash(path)
    return found


@cache
def record(python_path: str = "") -> StartupRecord:
    """The parent's record, taken once per process and ``PYTHONPATH`` (the child's)."""
    dirs = _site_dirs() + _path_dirs(python_path)
    return {"dirs": dirs, "files": manifest(dirs)}


def differences(recorded: StartupRecord) -> list[str]:
    """What differs between the parent's record and this process's files (empty: none)."""
    dirs = list(recorded.get("dirs", []))
    now = manifest(dirs)
    before: dict[str, str] = dict(recorded.get("files", {}))
    problems = [f"{p} was added" for p in now.keys() - before.keys()]
    problems += [f"{p} was removed" for p in before.keys() - now.keys()]
    problems += [f"{p} was changed" for p in now.keys() & before.keys() if now[p] != before[p]]
    unknown = [d for d in _site_dirs() if d not in dirs and Path(d).is_dir()]
    problems += [f"site dir {d} was not in the parent's record" for d in unknown]
    return sorted(problems)


def write_config(root: Path, *, writable: list[str], private: list[str], layers: str,
                 python_path: str, namespace: dict[str, list[str]] | None = None,
                 fixed_size: list[str] | None = None,
                 cgroup: dict[str, Any] | None = None) -> None:
    config = {"record": record(python_path), "writable": writable, "private": private,
              "layers": layers, "namespace": namespace, "fixed_size": fixed_size or [],
              "cgroup": cgroup or {}}
    (root / CONFIG_NAME).write_text(json.dumps(config), encoding="utf-8")


def _site_dirs_for_children() -> None:
    """Python processes this child starts with its interpreter flags (multiprocessing's spawn
    and forkserver pass ``-S`` on) still find site-packages."""
    extra = [d for d in site.getsitepackages() if d not in os.environ.get("PYTHONPATH", "")]
    if extra:
        current = os.environ.get("PYTHONPATH", "")
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [current, *extra]))


def child_start(job_path: str) -> None:
    """First thing in a child started with ``python -S``: check, run ``site``, confine.

    Exits with ``EXIT_SETUP`` and a message on stderr when the interpreter was tampered with.
    A child without a config (started by hand) only runs ``site``."""
    config_path = Path(job_path).parent / CONFIG_NAME
    config: dict[str, Any] = {}  # JSON the parent wrote: read with .get
    if config_path.exists():
        config = json.loads(config_path.read_text(encoding="utf-8"))
        problems = differences(config.get("record", {}))
        if problems:
            shown = "; ".join(problems[:8]) + (" ..." if len(problems) > 8 else "")
            sys.stderr.write("evaluator setup error: the interpreter or the evaluator changed "
                             f"since the app started, refusing to run: {shown}\n")
            sys.stderr.flush()
            os._exit(EXIT_SETUP)
    if sys.flags.no_site:
        site.main()
        _site_dirs_for_children()
    if config:
        from cudal1_evaluator.isolation import cgroup, confine, namespaces

        root_start = os.geteuid() == 0  # the parent's uid: confine may drop it to nobody
        group = _join_cgroup(config.get("cgroup"))  # before any fork: every process in it
        plan = config.get("namespace")
        # before landlock, which forbids mounting; the outer process never returns from here
        entered = namespaces.enter(plan) if isinstance(plan, dict) else None
        state = confine.apply(list(config.get("writable", [])),
                              private=list(config.get("private", [])),
                              layers=str(config.get("layers", "auto")),
                              fixed_size=list(config.get("fixed_size", [])),
                              served=list(plan.get("serve", [])) if isinstance(plan, dict)
                              else [],
                              tasks_counted=bool(group and group[0] and
                                                 config["cgroup"].get("tasks")))
        if group is not None:
            (state.layers if group[0] else state.missing)[cgroup.LAYER] = group[1]
        if entered is not None:
            state.layers.update(entered.layers)
            state.missing.update(entered.missing)
            _drop_capabilities(state)
            if not root_start:
                _readable_by_the_parent()
            _filter_syscalls(state, strict=namespaces.LAYER not in state.layers)


def _join_cgroup(config: object) -> tuple[bool, str] | None:
    """(joined?, what holds or why not) for a child the parent meant to put in a cgroup (a
    candidate-mode one); None for the others."""
    if not isinstance(config, dict) or not (config.get("procs") or config.get("why")):
        return None
    from cudal1_evaluator.isolation import cgroup

    procs = [str(p) for p in config.get("procs") or []]
    return cgroup.join(procs) if procs else (False, str(config.get("why")))


def _filter_syscalls(state: Confinement, strict: bool) -> None:
    """In a candidate-mode child's work process, last: the calls no candidate needs
    (``strict``: without a PID namespace of its own, see ``isolation.syscalls``)."""
    from cudal1_evaluator.isolation import syscalls

    installed, what = syscalls.install(strict)
    (state.layers if installed else state.missing)[syscalls.LAYER] = what


def _readable_by_the_parent() -> None:
    """In a candidate-mode child's work process started without root: dumpable again, so
    the parent may read its outputs (``process_vm_readv``) and its namespace. Entering a user
    namespace made it non-dumpable (it gained capabilities there), and a parent without
    ``CAP_SYS_PTRACE`` then read nothing: every candidate came back ``incorrect`` with
    ``stop_escaped`` (a fresh-eyes round, 2026-12-01). Nothing is hidden from the candidate
    in its own process; other candidates cannot see it (PID namespaces) nor ``ptrace`` it
    (the seccomp filter). No core file is written (``RLIMIT_CORE`` 0). A root start leaves
    it as it is: the parent reads through ``CAP_SYS_PTRACE``, and a dumpable process of
    ``nobody`` would be open to every other process of that uid on the host."""
    from cudal1_evaluator.isolation.dumpable import set_dumpable

    set_dumpable(True)


def _drop_capabilities(state: Confinement) -> None:
    """In a candidate-mode child's work process, after every other layer (they need them)."""
    from cudal1_evaluator.isolation import capabilities

    dropped, what = capabilities.drop_all()
    (state.layers if dropped else state.missing)[capabilities.LAYER] = what
