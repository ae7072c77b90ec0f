"""Build isolation and caching for candidates that compile extensions (no torch import).

Each candidate gets ``TORCH_EXTENSIONS_DIR`` (and Triton's / Inductor's caches)
under a directory keyed by sha256(candidate source, torch version, arch, flags):
a re-evaluation of the same candidate compiles nothing, and two candidates using
the same extension ``name=`` never share a build. Keyed dirs nest in a per-source dir
(``source_dir``) that the parent, which does not import torch, can name: it is the only part
of the cache a candidate's child may see or write (``cudal1_evaluator.isolation.namespaces``).

torch serializes builds of one extension with a ``lock`` file (``FileBaton``) that only the
builder removes: a builder killed mid-compile (a cancel, a timeout, kill -9 of the app) leaves
it, and every later import of that extension waits on it forever. So every child that uses a
keyed dir holds a shared ``flock`` on it for its life (the kernel drops it when the process
dies, however it dies); a child that finds no other holder knows every ``lock`` there is a dead
builder's and removes it with that build's half-written files (``_claim``).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from cudal1_evaluator.isolation import lifetime

_FLAG_VARS = ("CC", "CXX", "CFLAGS", "CXXFLAGS", "LDFLAGS", "TORCH_CUDA_ARCH_LIST",
              "NVCC_APPEND_FLAGS", "NVCC_PREPEND_FLAGS", "CUDA_HOME")
MARKER = ".cudal1-complete"
USERS = ".cudal1-users"  # flock'ed (shared) by every live child using the keyed dir
TORCH_BATON = "lock"  # torch.utils.cpp_extension's FileBaton, one per extension dir
_claimed: dict[Path, int] = {}  # keyed dir -> the open file holding this process's flock


def default_build_dir() -> Path:
    """Used when the job names none: persistent across runs, private to this user."""
    return Path(tempfile.gettempdir()) / f"cudal1-tui-builds-{os.getuid()}"


def build_root_of(build_dir: str | None) -> Path:
    """The cache a job builds in: its own ``build_dir``, else the default."""
    return Path(build_dir) if build_dir else default_build_dir()


def source_dir(root: Path, source: str) -> Path:
    """The per-source dir of ``root`` holding every keyed build dir of ``source``."""
    digest = hashlib.sha256(source.encode("utf-8", "replace")).hexdigest()
    return root / f"src-{digest[:16]}"


def build_key(source: str, torch_version: str, arch: str) -> str:
    digest = hashlib.sha256()
    for part in (source, torch_version, arch, sys.version.split()[0],
                 *(f"{v}={os.environ.get(v, '')}" for v in _FLAG_VARS)):
        digest.update(part.encode("utf-8", "replace"))
        digest.update(b"\0")
    return digest.hexdigest()[:32]


def job_arch(cuda_arch: str) -> str:
    """The build key's arch part for a job naming its CUDA arch (``Job.cuda_arch``), which also
    becomes ``TORCH_CUDA_ARCH_LIST``: a build-only run and the worker then agree on the key
    without the build-only run asking the GPU. "" when the job names none."""
    if not cuda_arch:
        return ""
    os.environ["TORCH_CUDA_ARCH_LIST"] = cuda_arch
    return f"arch-{cuda_arch}"


@dataclass
class BuildDir:
    path: Path
    cached: bool
    interrupted: list[str] = field(default_factory=list)  # dead builders' extensions, removed

    def note(self) -> str:
        """What a progress line or build message says about builds removed here."""
        if not self.interrupted:
            return ""
        return (f"; built again: {', '.join(self.interrupted)} (an earlier build was "
                "interrupted and had left torch's lock)")

    def mark_complete(self) -> None:
        (self.path / MARKER).write_text("ok\n")


def prepare(build_root: str | None, source: str, torch_version: str, arch: str) -> BuildDir:
    """Create the keyed dir and point torch/Triton/Inductor caches into it."""
    path = source_dir(build_root_of(build_root), source) / build_key(source, torch_version, arch)
    path.mkdir(parents=True, exist_ok=True)
    interrupted = _claim(path)
    if interrupted:
        (path / MARKER).unlink(missing_ok=True)
    cached = (path / MARKER).exists()
    os.environ["TORCH_EXTENSIONS_DIR"] = str(path / "torch_extensions")
    os.environ["TRITON_CACHE_DIR"] = str(path / "triton")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(path / "inductor")
    return BuildDir(path, cached, interrupted)


def _claim(path: Path) -> list[str]:
    """Hold a shared flock on ``path`` for this process's life; first, if no live process
    holds one, remove the builds a dead builder left half done (their torch baton still
    there). Returns the extension names removed."""
    if path in _claimed:
        return []
    try:
        fd = os.open(path / USERS, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError:  # a cache this process may only read: it builds nothing there either
        return []
    removed = []
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        pass  # another child uses the dir: a baton may be its build in progress
    else:
        removed = _remove_interrupted(path)
    fcntl.flock(fd, fcntl.LOCK_SH)
    _claimed[path] = fd
    return removed


def _remove_interrupted(path: Path) -> list[str]:
    """Each torch baton under ``path`` (a candidate may name its own ``build_directory``
    there); an extension dir of torch's whole, with the baton: its objects may be half written,
    and ninja would take a truncated one as up to date."""
    extensions = path / "torch_extensions"
    removed = []
    for baton in sorted(path.rglob(TORCH_BATON)):
        if not baton.is_file():
            continue
        if baton.parent.parent == extensions:
            lifetime.remove_tree(baton.parent)
        else:
            baton.unlink(missing_ok=True)
        removed.append(baton.parent.name)
    return removed


_ERROR_LINE = re.compile(r"(\berror\b|\bError\b|undefined reference|fatal)", re.IGNORECASE)
_NOISE = re.compile(r"^\s*(\[\d+/\d+\]|FAILED:|ninja: build stopped|subprocess\.)| -MMD | -MF ")
_HEAD = re.compile(r"(Error building extension '[^']*')\S*:.*")


def trim_compile_log(text: str, *, context: int = 3, max_lines: int = 40,
                     max_chars: int = 4000) -> str:
    """The compiler's ``error`` lines with a little context, without ninja's command noise."""
    text = _HEAD.sub(r"\1:", text)
    lines = [ln for ln in text.splitlines() if not _NOISE.search(ln) and len(ln) < 2000]
    keep: set[int] = set()
    for i, line in enumerate(lines):
        if _ERROR_LINE.search(line):
            keep.update(range(max(0, i - 1), min(len(lines), i + context + 1)))
    chosen = [lines[i] for i in sorted(keep)] if keep else lines[-max_lines:]
    out = "\n".join(chosen[:max_lines])
    if len(chosen) > max_lines:
        out += f"\n... ({len(chosen) - max_lines} more lines)"
    return out[:max_chars]


def looks_like_build_error(message: str) -> bool:
    lowered = message.lower()
    return "Error building extension" in message or ("ninja" in lowered and "error" in lowered)


def headline(log: str) -> str:
    """The first line of a trimmed log, plus its first ``error`` line when that differs."""
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    if not lines:
        return ""
    first = lines[0][:300]
    error = next((ln for ln in lines[1:] if "error" in ln.lower()), "")
    return f"{first} {error[:300]}".strip() if error else first
