"""Who is to blame for a forbidden event: attribution by origin, not by install location.

Candidate code is the candidate module's file, code it compiled itself (``compile``/``exec``
with filenames of its choosing), and files under its own build and temp dirs (which is where
its extensions, Triton kernels and inductor's generated code live). Libraries are never
candidate code because of where they are installed (``pip install --target`` + ``PYTHONPATH``
works), and never trusted because of it either.

An event is the candidate's when the first frame outside the standard library is candidate
code. When a library is on top but candidate code is anywhere below it, the library acts for
the candidate, and what it does is judged by what a library may do on its own: run a compiler
or build tool, grab frames or walk the collector in code that itself names that function, load
a shared library through ctypes in a module that uses ctypes, write files (the OS sandbox
decides where). A library handed a forbidden function as an argument
(``torch.utils._pytree.tree_map(gc.get_referrers, ...)``) does not name it: that is a relay,
and the candidate frame below it is blamed.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import sysconfig
import threading
from collections.abc import Iterable
from functools import cache
from types import CodeType, FrameType, ModuleType
from typing import Any, Literal

Blame = Literal["first", "grab", "attr", "direct"]

# stdlib helpers that hand frames to their caller: followed to the code that asked. Traceback
# formatting reads ``tb_frame`` for everyone, so only its frame grabs (walk_stack) are followed.
_FOLLOW_GRAB = ("inspect.py", "traceback.py")
_FOLLOW_ATTR = ("inspect.py",)
# what a library may run for the candidate (compilers, build and probing tools, Python itself
# for torch's compile workers); anything else it starts while candidate code is below is blamed
BUILD_TOOLS = frozenset({
    "ninja", "c++", "g++", "gcc", "cc", "clang", "clang++", "nvcc", "ptxas", "cuobjdump",
    "nvdisasm", "fatbinary", "nvlink", "cicc", "ld", "ld.gold", "ld.lld", "as", "ar", "which",
    "uname", "ldconfig", "openssl", "nvidia-smi", "hipcc", "lscpu",
    # probes the stdlib runs for a library: platform.architecture() runs ``file`` (seen on the
    # H100 when Triton launched its first kernel), ctypes.util.find_library objdump/gcc/ld
    "file", "objdump", "readelf", "getconf", "ccache", "sccache",
})
# a build tool's name, cross-prefixed (x86_64-linux-gnu-g++) or versioned (gcc-13) as well
_COMPILER_NAME = re.compile(
    r"(?:[\w.]+-)*(?:" + "|".join(re.escape(n) for n in sorted(BUILD_TOOLS)) + r")(?:-[\d.]+)?")
# names a library's own code uses when it grabs frames, walks gc, traces or kills by itself
_OWN_NAMES: dict[str, frozenset[str]] = {
    "sys._getframe": frozenset({"_getframe", "currentframe", "stack", "getouterframes",
                                "getframeinfo", "getinnerframes", "trace", "walk_stack",
                                "extract_stack", "format_stack", "print_stack"}),
    "sys._current_frames": frozenset({"_current_frames"}),
    "gc.get_objects": frozenset({"get_objects"}),
    "gc.get_referrers": frozenset({"get_referrers"}),
    "gc.get_referents": frozenset({"get_referents"}),
    "sys.settrace": frozenset({"settrace"}),
    "sys.setprofile": frozenset({"setprofile"}),
    "sys.addaudithook": frozenset({"addaudithook"}),
    "sys.monitoring.register_callback": frozenset({"register_callback"}),
    "os.fork": frozenset({"fork"}),
    "os.forkpty": frozenset({"forkpty"}),
    "os.kill": frozenset({"kill", "terminate", "send_signal", "shutdown"}),
    "os.killpg": frozenset({"killpg", "kill", "terminate", "shutdown"}),
}
_SPAWN_EVENTS = frozenset({"subprocess.Popen", "os.posix_spawn", "os.exec", "os.spawn"})
FILE_EVENTS = frozenset({"open", "os.remove", "os.rename", "os.rmdir", "os.truncate", "os.chmod",
                         "os.link", "os.symlink", "shutil.rmtree", "shutil.move", "os.chown"})


@cache
def _stdlib_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {paths["stdlib"], paths["platstdlib"]}
    return tuple(sorted(os.path.realpath(r) + os.sep for r in roots))


@cache
def is_stdlib(filename: str) -> bool:
    if filename.startswith("<frozen"):
        return True
    real = os.path.realpath(filename)
    return real.startswith(_stdlib_roots()) and "-packages" + os.sep not in real


@cache
def _realpath(path: str) -> str:
    return os.path.realpath(path)


def _dirs(paths: Iterable[str]) -> tuple[str, ...]:
    return tuple(os.path.realpath(p) + os.sep for p in paths if p)


class Origins:
    """What counts as candidate code in this process."""

    def __init__(self, dirs: Iterable[str] = (), files: Iterable[str] = (),
                 never: Iterable[str] = ()) -> None:
        self.dirs = _dirs(dirs)
        self.files = frozenset(os.path.realpath(f) for f in files)
        self.never = _dirs(never)  # carve-outs: library dirs inside the candidate's dirs
        self.compiled: set[str] = set()  # filenames of code the candidate compiled itself
        self._known: dict[str, bool] = {}

    def is_candidate(self, filename: str) -> bool:
        if filename in self.compiled:
            return True
        known = self._known.get(filename)
        if known is None:
            real = _realpath(filename)
            known = not filename.startswith("<") and not real.startswith(self.never) and (
                real in self.files or real.startswith(self.dirs))
            self._known[filename] = known
        return known

    def note_compiled(self, filename: Any) -> None:
        if isinstance(filename, bytes):
            filename = os.fsdecode(filename)
        if isinstance(filename, str):
            self.compiled.add(filename)

    def innermost(self, frame: FrameType | None) -> FrameType | None:
        """The innermost candidate frame on the stack from ``frame`` outwards."""
        while frame is not None and not self.is_candidate(frame.f_code.co_filename):
            frame = frame.f_back
        return frame

    def claims_other_file(self, filename: Any) -> bool:
        """``filename`` names a real file or library location that is not the candidate's:
        code compiled under it would pass for someone else's frames."""
        if isinstance(filename, bytes):
            filename = os.fsdecode(filename)
        if not isinstance(filename, str) or filename.startswith("<") or \
                self.is_candidate(filename):
            return False
        real = _realpath(filename)
        roots = _dirs(p for p in sys.path if os.path.isabs(p))
        return os.path.exists(real) or real.startswith(roots) or real.startswith(_stdlib_roots())


def first_non_stdlib(frame: FrameType | None) -> FrameType | None:
    while frame is not None and is_stdlib(frame.f_code.co_filename):
        frame = frame.f_back
    return frame


def culprit(frame: FrameType | None, origins: Origins, *, blame: Blame = "first",
            event: str = "", args: tuple[Any, ...] = ()) -> FrameType | None:
    """The candidate frame to blame for ``event`` raised with ``frame`` as direct caller, or
    None when it is nobody's fault (stdlib bookkeeping, or a library doing its own work).

    ``direct``: only the direct caller counts (compile and code construction, which importlib
    and torch do for everyone). ``grab``/``attr`` (frame grabs, frame attributes): stdlib
    callers are bookkeeping, except the helpers that hand frames out, which are followed.
    """
    if frame is None:
        return None
    filename = frame.f_code.co_filename
    if blame == "direct":
        return frame if origins.is_candidate(filename) else None
    follow = _FOLLOW_GRAB if blame == "grab" else _FOLLOW_ATTR
    if blame in ("grab", "attr") and is_stdlib(filename) and not filename.endswith(follow):
        return None  # stdlib bookkeeping (namedtuple, logging, typing, enum, tracebacks)
    first = first_non_stdlib(frame)
    if first is None:
        return None
    if origins.is_candidate(first.f_code.co_filename):
        return first
    below = origins.innermost(first.f_back)
    if below is None or library_may(event, args, first, origins):
        return None
    return below


def library_may(event: str, args: tuple[Any, ...], library: FrameType,
                origins: Origins | None = None) -> bool:
    """May a library (``library`` is its frame) do ``event`` by itself while candidate code is
    below it? Only what libraries do on their own; never what they were merely handed."""
    if event == "thread.start":
        return not args or not _runs_candidate_code(args[0], origins or Origins())
    if event == "cuda.stream":
        return True  # a library's own streams (torch.cuda.graph's capture stream)
    if event in _SPAWN_EVENTS:
        executable = _executable(event, args)
        return _is_build_tool(executable, origins or Origins()) or \
            _ships_with(library, executable)
    if event in FILE_EVENTS:
        return True  # a library's own file changes: the OS sandbox decides where they may go
    if event == "object.__getattr__":
        return len(args) > 1 and args[1] in library.f_code.co_names
    if event.startswith("ctypes."):
        return _uses_ctypes(library)
    if event == "object.__setattr__":
        return len(args) > 1 and args[1] == "__code__" and _defines(library, args[0])
    names = _OWN_NAMES.get(event)
    return names is not None and not names.isdisjoint(library.f_code.co_names)


def _defines(library: FrameType, function: Any) -> bool:
    """Was ``function`` defined in the library frame's own file? A library may swap the code of
    its own functions (Dynamo relabels the warning wrappers it makes for a compiled frame),
    never that of a function it was handed."""
    code = getattr(function, "__code__", None)
    return code is not None and code.co_filename == library.f_code.co_filename


def _runs_candidate_code(function: Any, origins: Origins) -> bool:
    """Would a thread starting ``function`` run candidate code (or a bare builtin, such as
    ``gc.get_referrers``, that the candidate handed over)?"""
    owner = getattr(function, "__self__", None)
    if isinstance(owner, threading.Thread):
        function = getattr(owner, "_target", None) or type(owner).run
    for _ in range(8):  # unwrap partials and bound methods
        inner = getattr(function, "func", None) or getattr(function, "__func__", None)
        if inner is None:
            break
        function = inner
    code = getattr(function, "__code__", None)
    if not isinstance(code, CodeType):
        return not isinstance(function, type)  # a builtin started as a thread: a relay
    return origins.is_candidate(code.co_filename)


def _executable(event: str, args: tuple[Any, ...]) -> str:
    exe = args[0] if args else None
    if not exe and event == "subprocess.Popen" and len(args) > 1:
        argv = args[1]
        if isinstance(argv, str | bytes):
            exe = os.fsdecode(argv).split()[0] if argv.strip() else ""
        elif isinstance(argv, list | tuple) and argv:
            exe = argv[0]
    try:
        return os.fsdecode(exe) if exe else ""
    except TypeError:
        return ""


def _is_build_tool(executable: str, origins: Origins) -> bool:
    if not executable:
        return False
    found = shutil.which(executable) or executable  # PATH as it is now, perhaps the candidate's
    if origins.is_candidate(found):
        return False  # a "gcc" the candidate wrote into its own dirs
    if _realpath(found) == _realpath(sys.executable):
        return True
    return _COMPILER_NAME.fullmatch(os.path.basename(executable)) is not None


def _ships_with(library: FrameType, executable: str) -> bool:
    """A library running a binary installed inside its own package (Triton's ``ptxas``)."""
    found = shutil.which(executable) if executable else None
    package = _package_dir(library.f_code.co_filename)
    return bool(found and package) and _realpath(found).startswith(package + os.sep)


@cache
def _package_dir(filename: str) -> str:
    """The top-level package directory ``filename`` belongs to ('' outside site dirs)."""
    real = _realpath(filename)
    for root in sorted(_dirs(p for p in sys.path if os.path.isabs(p)), key=len, reverse=True):
        if real.startswith(root) and "-packages" + os.sep in root:
            top = real[len(root):].split(os.sep, 1)[0]
            return root + top if top and not top.endswith(".py") else ""
    return ""


def executable_of(event: str, args: tuple[Any, ...]) -> str:
    """The program a spawn event starts, for the flag's message."""
    return _executable(event, args) if event in _SPAWN_EVENTS else ""


def _uses_ctypes(frame: FrameType) -> bool:
    for value in list(frame.f_globals.values()):
        module = value if isinstance(value, ModuleType) else None
        name = module.__name__ if module is not None else getattr(value, "__module__", "")
        if isinstance(name, str) and (name == "ctypes" or name.startswith("ctypes.")):
            return True
    return False
