"""The parent's side of the OS sandbox (stdlib only): which dirs a child may write, the
``bwrap`` wrapper where the child cannot confine itself, and the probe behind ``doctor``.

The child confines itself (``isolation.confine``) with landlock or a mount namespace; only when
the kernel offers neither and ``bwrap`` is installed does the parent wrap the child in it.
``CUDAL1_SANDBOX`` (``auto``, ``uid``, ``mountns``, ``off``) overrides the choice: ``uid`` is
``auto`` plus a separate uid for children started as root.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from cudal1_evaluator.isolation import landlock, lifetime, namespaces
from cudal1_evaluator.parent.build_cache import build_root_of, default_build_dir, source_dir

_PROBE = """
import json, sys
from cudal1_evaluator.isolation import confine, namespaces
off = sys.argv[2] == "off"
entered = None if off else namespaces.enter({"hide": [sys.argv[1]], "keep": [], "serve": []})
state = confine.apply([sys.argv[1]], private=[sys.argv[1]], layers=sys.argv[2])
if entered is not None:
    state.layers.update(entered.layers)
    state.missing.update(entered.missing)
print(json.dumps({"layers": state.layers, "missing": state.missing}))
"""


CANDIDATE_MODES = ("run", "profile", "build")  # the modes that run candidate code
PACKAGE_DIR = Path(__file__).resolve().parents[1]  # cudal1_evaluator/


def _job_fields(job_text: str | None) -> tuple[str | None, str | None]:
    """(build_dir, candidate_source) of a job's JSON text, each None when absent."""
    try:
        job = json.loads(job_text) if job_text else {}
    except ValueError:
        job = {}
    if not isinstance(job, dict):
        return None, None
    build_dir, source = job.get("build_dir"), job.get("candidate_source")
    return (build_dir if isinstance(build_dir, str) and build_dir else None,
            source if isinstance(source, str) else None)


def build_roots(job_text: str | None) -> list[str]:
    """The build caches a job may use: the default one and the job's own."""
    build_dir, _ = _job_fields(job_text)
    return [str(default_build_dir()), *([build_dir] if build_dir else [])]


def sandbox_dirs(root: Path, job_text: str | None, extra: Sequence[str] = (),
                 mode: str = "") -> list[str]:
    """The dirs a child may write: its private root, the build cache (the job's, else the
    default) and ``extra`` (e.g. an exchange dir of the parent's). A candidate mode with a
    known job gets only its own per-source dir of the cache, not the cache."""
    build_dir, source = _job_fields(job_text)
    shared = build_roots(job_text)
    if mode in CANDIDATE_MODES and source is not None:
        shared = [str(source_dir(build_root_of(build_dir), source))]
    dirs = [str(root), *shared, *extra]
    for cache in build_roots(job_text):  # private to this user: candidates' builds live there
        Path(cache).mkdir(mode=0o700, parents=True, exist_ok=True)
    for path in dirs[1:]:
        Path(path).mkdir(parents=True, exist_ok=True)  # rules need existing dirs
    return [os.path.realpath(p) for p in dict.fromkeys(dirs)]


def job_device(job_text: str | None) -> str:
    """A job's device (``cuda:1``), "" where its JSON names none."""
    try:
        job = json.loads(job_text) if job_text else {}
    except ValueError:
        job = {}
    device = job.get("device") if isinstance(job, dict) else None
    return device if isinstance(device, str) else ""


def on_cuda(job_text: str | None, warm_device: str) -> bool:
    return (job_device(job_text) or warm_device).startswith("cuda")


HOST_ALLOCATOR = {  # glibc malloc: freed memory kept for reuse, never handed back to the OS
    "MALLOC_MMAP_MAX_": "0",  # every block on the heap, whatever its size (no fresh mapping
    "MALLOC_MMAP_THRESHOLD_": str(32 << 20),  # to fault in), as blocks up to 32 MB would be
    "MALLOC_TRIM_THRESHOLD_": str(1 << 40),
}


def host_allocator_env(job_text: str | None, warm_device: str) -> dict[str, str]:
    """On a CPU, every child's allocator keeps freed memory, as CUDA's caching allocator does
    on a GPU: otherwise a fresh output costs page faults or not depending on how each
    process's heap happens to lie (glibc's dynamic thresholds), a cost the two runners do not
    share and one a candidate could skip by keeping its own buffers. Both sides get the same
    setting; nothing on CUDA changes."""
    return {} if on_cuda(job_text, warm_device) else dict(HOST_ALLOCATOR)


def namespace_plan(mode: str, job_text: str | None, writable: Sequence[str],
                   private: Sequence[str], layers: str,
                   warm_device: str = "") -> dict[str, list[str]] | None:
    """What a candidate-mode child hides in its own mount namespace (``isolation.namespaces``):
    the temp dir, ``/dev/shm``, the exchange base and the build caches, each covered by an
    empty tmpfs (``roomy``: the temp dir and ``/dev/shm``, 64 MB; the others 1 MB); ``keep``:
    its writable dirs, bound back; ``serve``: the caches of a child
    started without its job (warm), whose per-source dir is bound once the job comes;
    ``ipc``: its own IPC namespace, CUDA or not (System V memory, semaphores and queues
    shared with no other lane; the driver's IPC works across IPC namespaces: run of
    2026-11-30 on an H200, ``test_cuda_ipc_round_trip_across_processes[own-ipc-namespace]``
    and ``benchmarks/vmm_fd_diag.py``). None for trusted modes and with the sandbox off.
    ``/dev/shm`` is covered on CUDA too: CUDA buffers travel by the driver's IPC (arenas as
    file descriptors, outputs by handles: ``wire/cuda_ipc.py``), no file there."""
    if mode not in CANDIDATE_MODES or layers == "off":
        return None
    _, source = _job_fields(job_text)
    serve = [] if source is not None else [w for w in writable if w not in private]
    shared = lifetime.exchange_base()
    shm = [str(lifetime.SHM_DIR)]
    checkout, cuda = source_checkout(), on_cuda(job_text, warm_device)
    temps = [tempfile.gettempdir(), *(p for p in SHARED_TEMPS if os.path.isdir(p))]
    hide = [*temps, *shm, *homes(), *beyond_the_system(), *checkout,
            *([str(shared)] if shared is not None else []), *build_roots(job_text), *serve,
            *daemons_dirs(), *(p for p in CGROUP_DIRS if os.path.isdir(p))]
    read = [*([str(PACKAGE_DIR)] if checkout else []),
            *(p for p in RUN_KEPT_ON_CUDA if cuda and os.path.isdir(p))]
    return {"hide": [os.path.realpath(p) for p in dict.fromkeys(hide)],
            "keep": [w for w in writable if w not in serve], "serve": serve,
            "roomy": [os.path.realpath(p) for p in (*temps, *shm)],
            "read": read, "sealed": checkout, "ipc": ["own"],
            "owner": [str(runs_as(layers))]}


# The host's shared temp dirs, hidden whatever TMPDIR names: other users' files and the
# sockets of their sessions (tmux, ssh-agent, X11) live there (round 15 reached a socket in
# /tmp with TMPDIR set elsewhere).
SHARED_TEMPS = ("/tmp", "/var/tmp")
RUN_DIRS = ("/run", "/var/run")
# The host's cgroup files: host-wide memory use and CPU time (round 20). A child's own group is
# joined before its view is made, and the parent reads the group in its own view.
CGROUP_DIRS = ("/sys/fs/cgroup",)
# What CUDA may use under /run: the persistence daemon's socket dir (the NVIDIA container
# toolkit mounts the same into containers, whose /run is otherwise their own and empty).
RUN_KEPT_ON_CUDA = ("/run/nvidia-persistenced",)


def daemons_dirs() -> list[str]:
    """``/run`` (and ``/var/run`` where it is a dir of its own): the sockets of the host's
    daemons live there (docker, containerd, dbus, systemd). A child started as root stays uid
    0 to the host, capabilities dropped or not, and uid 0 owns those sockets: connecting to
    ``docker.sock`` is a way out of every other layer (round 14's open item). Hidden whole;
    on CUDA what the driver may use is bound back (``RUN_KEPT_ON_CUDA``)."""
    return [path for path in dict.fromkeys(os.path.realpath(p) for p in RUN_DIRS)
            if os.path.isdir(path)]


def source_checkout() -> list[str]:
    """The dir the evaluator is imported from, when it is a source checkout rather than an
    installed site dir: hidden, with only the ``cudal1_evaluator`` package (and the interpreter,
    where a virtual environment lives inside it) bound back, so a candidate lists no README,
    ``.git`` or ``.env`` of the user's checkout. Not when the interpreter lives at or above it
    (hiding it would hide the interpreter)."""
    import site

    root = str(PACKAGE_DIR.parent)
    site_dirs = {os.path.realpath(p) for p in [*site.getsitepackages(),
                                               site.getusersitepackages()]}
    if root == os.sep or root in site_dirs:
        return []
    above = [d for d in namespaces.interpreter_prefixes() if namespaces.under(root, d)]
    return [] if above else [root]


SYSTEM_DIRS = frozenset({"bin", "boot", "dev", "etc", "gnu", "lib", "lib32", "lib64", "libx32",
                         "nix", "opt", "proc", "run", "sbin", "snap", "sys", "tmp", "usr", "var"})


def beyond_the_system() -> list[str]:
    """Every top-level dir that is not the system's own (``/home``, ``/root``, ``/work``,
    ``/mnt``, ``/srv``, ``/media``, whatever a host names its users' data): hidden from
    candidate code, which needs the system's tools and libraries, not the users' files (a
    red team listed another checkout of this project, and ``.git`` in it, from a candidate).
    What the child needs in one (the interpreter, its tools, its own dirs) is bound back; not
    one where such a dir lies at or above it (hiding it would hide the interpreter). A name
    that links into a system dir (``/home`` -> ``/var/home`` on ostree hosts) is hidden there,
    never a whole system dir."""
    needed = _needed_dirs()
    out = []
    for name in sorted(os.listdir(os.sep)):
        path = os.path.realpath(os.path.join(os.sep, name))
        top = path.split(os.sep)[1] if path != os.sep else ""
        users = name not in SYSTEM_DIRS or top not in SYSTEM_DIRS  # /home -> /var/home too
        whole = top in SYSTEM_DIRS and path == os.path.join(os.sep, top)  # a link to /usr
        if top and users and not whole and os.path.isdir(path) and \
                not any(namespaces.under(path, d) for d in needed):
            out.append(path)
    return list(dict.fromkeys(out))


def _needed_dirs() -> list[str]:
    cwd = os.path.realpath(os.getcwd())  # on this process's sys.path, not on the child's
    return [d for d in namespaces.interpreter_dirs() if d != cwd]


def homes() -> list[str]:
    """The user's home dirs (keys, tokens, shell history, the app's own sessions), hidden from
    candidate code: it may read anywhere it is not hidden from, and what it reads can leave in
    its messages and logs, which are stored and exported. Not where the interpreter itself
    lives in or above a home (hiding it would hide the interpreter); the dirs the child needs
    under a home (the interpreter's, its tools', its own) are bound back."""
    found = {os.path.expanduser("~")}
    with contextlib.suppress(KeyError, ImportError):
        import pwd

        found.add(pwd.getpwuid(os.getuid()).pw_dir)
    needed = _needed_dirs()
    out = []
    for home in sorted(os.path.realpath(h) for h in found if h):
        if home != os.sep and os.path.isdir(home) and \
                not any(namespaces.under(home, d) for d in needed):
            out.append(home)
    return out


def writable_for(mode: str) -> tuple[str, ...]:
    """Extra dirs a child of ``mode`` may write. The referee (trusted: it never imports candidate
    code) creates the exchange files inside the worker's exchange dir, so it may write under the
    temp dir where every child's private dir lives and under the shared-memory base."""
    if mode != "referee":
        return ()
    shared = lifetime.exchange_base()
    return (tempfile.gettempdir(),) + ((str(shared),) if shared is not None else ())


def requested_layers() -> str:
    value = os.environ.get("CUDAL1_SANDBOX", "auto").strip().lower()
    return value if value in ("auto", "uid", "mountns", "off") else "auto"


def runs_as(layers: str) -> int:
    """The uid a candidate-mode child started by this process runs as (-1: this one's own)."""
    if os.geteuid() != 0 or layers == "off":
        return -1
    from cudal1_evaluator.isolation.confine import SANDBOX_UID

    return SANDBOX_UID if layers == "uid" else 0


def layers_for_root(layers: str, mode: str, job_text: str | None = None,
                    warm_device: str = "") -> str:
    """``auto`` becomes ``uid`` for a candidate-mode child started as root: uid 0 owns the
    host's secrets whatever capabilities it drops (``/etc/shadow`` is mode 640, owner root: a
    root-started candidate read it in round 15), so candidate code runs as ``nobody``; the
    covers over hidden places let it reach an interpreter under ``/root``. On CUDA too, where
    the driver's device nodes let others in (the usual 0666; an H200 ran nvcc, Triton and CUDA
    graph candidates so, 2026-11-29): buffers travel by the driver (arenas as descriptors
    passed over the talk socket, outputs by IPC handles), which need no file an owner could
    hold. Where they do not (0660 for a ``video`` group), ``nobody``
    could not start CUDA, and the child stays uid 0, as its ``sandbox`` flag says. A trusted
    child never runs candidate code and stays the uid that started it: its writable dirs are
    every child's (the temp dir)."""
    if mode not in CANDIDATE_MODES:  # never runs candidate code: stays who started it
        return "auto" if layers == "uid" else layers
    if layers == "auto" and os.geteuid() == 0 and \
            (not on_cuda(job_text, warm_device) or gpu_nodes_open_to_all()):
        return "uid"
    return layers


GPU_NODES = ("nvidiactl", "nvidia-uvm")  # under /dev, and every nvidiaN


def gpu_nodes_open_to_all(dev: str = "/dev") -> bool:
    """Whether every NVIDIA device node here lets any uid read and write it (True where there
    are none: nothing to keep a non-root child from)."""
    nodes = [*Path(dev).glob("nvidia[0-9]*"), *(Path(dev) / name for name in GPU_NODES)]
    for node in nodes:
        try:
            if node.stat().st_mode & 0o006 != 0o006:
                return False
        except OSError:
            continue
    return True


def outer_sandbox(writable: list[str]) -> tuple[list[str], str]:
    """(argv prefix, the layers the child applies itself): ``bwrap`` without landlock."""
    layers = requested_layers()
    bwrap = shutil.which("bwrap")
    if layers not in ("auto", "uid") or landlock.abi_version()[0] or bwrap is None:
        return [], layers
    prefix = [bwrap, "--ro-bind", "/", "/", "--dev-bind", "/dev", "/dev", "--proc", "/proc",
              "--unshare-net", "--die-with-parent"]
    for path in writable:
        prefix += ["--bind", path, path]
    return [*prefix, "--"], "bwrap"


def probe() -> tuple[bool, str]:
    """(file system confined?, what a child gets here), measured in a throwaway process."""
    with tempfile.TemporaryDirectory(prefix="cudal1-sandbox-probe-") as tmp:
        package_root = str(Path(__file__).resolve().parents[2])
        env = {**os.environ, "PYTHONPATH": package_root}
        try:
            out = subprocess.run([sys.executable, "-c", _PROBE, tmp, requested_layers()],
                                 capture_output=True, text=True, timeout=30, env=env,
                                 check=True).stdout
            found = json.loads(out.strip().splitlines()[-1])
        except (OSError, subprocess.SubprocessError, ValueError, IndexError) as exc:
            return False, f"the sandbox probe failed: {exc}"
    layers, missing = found["layers"], found["missing"]
    asked = requested_layers()
    if asked != "uid" and layers_for_root(asked, "run") == "uid":
        # the probe is no candidate child: it gets neither the covers nor the uid drop
        missing.pop("separate uid", None)
        layers["uid"] = "candidate children started as root run as nobody (not probed here)"
    if outer_sandbox([])[1] == "bwrap":
        layers["files"] = "bubblewrap (read-only root, no network)"
    text = "; ".join(f"{k}: {v}" for k, v in layers.items())
    text += "".join(f"; no {k} ({v})" for k, v in missing.items())
    return "files" in layers, text
