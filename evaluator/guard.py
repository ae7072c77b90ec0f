"""The runtime watch over candidate code inside the worker: audit hook, threads, streams.

Attribution: an event is the candidate's when the first frame outside the standard library,
walking out from where the event was raised, belongs to a file that is neither the standard
library, site-packages (torch, triton, ninja...) nor this package. So ``load_inline`` running the
compiler, Triton calling ``ptxas`` or inductor starting compile threads are the libraries' own
business, while ``subprocess.run`` or ``threading.Thread(...).start()`` written in the candidate
(or in code it generated) are the candidate's. Frame grabs are judged on the direct caller
(stdlib helpers such as ``namedtuple`` and ``logging`` read their caller's frame all the time),
except through ``inspect``/``traceback``, which are followed to the code that asked.

Before ``lock_down()`` the candidate's events are recorded; afterwards they are also refused
(the audited call raises ``PermissionError``). Audit hooks cannot be removed: ``close()`` only
disarms this one (tests install and close guards in one process).
"""

from __future__ import annotations

import _thread
import functools
import os
import sys
import sysconfig
import tempfile
import threading
import weakref
from collections.abc import Callable, Iterable
from functools import cache
from pathlib import Path
from types import FrameType
from typing import Any, Literal

from evaluator.schema import Flag, Severity

_PROCESS_EVENTS = frozenset({"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn",
                             "os.spawn", "os.fork", "os.forkpty", "pty.spawn", "os.kill",
                             "os.killpg", "os.startfile"})
_FRAME_EVENTS = frozenset({"sys._getframe", "sys._current_frames"})
_FRAME_ATTRS = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_back"})
_GC_EVENTS = frozenset({"gc.get_objects", "gc.get_referrers", "gc.get_referents"})
_TRACE_EVENTS = frozenset({"sys.settrace", "sys.setprofile", "sys.addaudithook",
                           "sys.monitoring.register_callback"})
_PATH_EVENTS = frozenset({"os.remove", "os.rename", "os.rmdir", "os.truncate", "os.chmod",
                          "os.link", "os.symlink", "shutil.rmtree", "shutil.move", "os.chown"})
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
# stdlib helpers that hand frames to their caller: followed to the code that asked. Traceback
# formatting reads ``tb_frame`` for everyone, so only its frame grabs (walk_stack) are followed.
_FOLLOW_GRAB = ("inspect.py", "traceback.py")
_FOLLOW_ATTR = ("inspect.py",)
_PACKAGE_DIR = str(Path(__file__).resolve().parent)

Event = tuple[str, Severity, str]  # (flag code, severity, what happened)


@cache
def _stdlib_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {paths["stdlib"], paths["platstdlib"]}
    return tuple(sorted(os.path.realpath(r) + os.sep for r in roots))


@cache
def _trusted_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {paths["purelib"], paths["platlib"], _PACKAGE_DIR}
    roots |= {p for p in sys.path if p.rstrip(os.sep).endswith(("site-packages", "dist-packages"))}
    torch_mod = sys.modules.get("torch")
    if torch_mod is not None and getattr(torch_mod, "__file__", None):
        roots.add(os.path.dirname(os.path.dirname(str(torch_mod.__file__))))
    return tuple(sorted(os.path.realpath(r) + os.sep for r in roots if r))


@cache
def _is_stdlib(filename: str) -> bool:
    if filename.startswith("<frozen"):
        return True
    real = os.path.realpath(filename)
    return real.startswith(_stdlib_roots()) and "-packages" + os.sep not in real


@cache
def _is_trusted(filename: str) -> bool:
    return _is_stdlib(filename) or os.path.realpath(filename).startswith(_trusted_roots())


def _first_non_stdlib(frame: FrameType | None) -> FrameType | None:
    while frame is not None and _is_stdlib(frame.f_code.co_filename):
        frame = frame.f_back
    return frame


Blame = Literal["first", "grab", "attr", "direct"]


_BLAME: dict[str, Blame] = {"frame_access": "grab", "forged_filename": "direct"}


def culprit(frame: FrameType | None, *, blame: Blame = "first",
            extra_trusted: tuple[str, ...] = ()) -> FrameType | None:
    """The candidate frame responsible for an event raised with ``frame`` as direct caller.

    ``first``: the first frame outside the stdlib decides. ``grab``/``attr`` (frame grabs,
    frame attributes): stdlib callers are bookkeeping, except the helpers that hand frames out,
    which are followed. ``direct``: only the direct caller counts (compile and code
    construction, which importlib does for everyone).
    """
    if frame is None:
        return None

    def trusted(f: FrameType) -> bool:
        name = f.f_code.co_filename
        return _is_trusted(name) or os.path.realpath(name).startswith(extra_trusted)

    filename = frame.f_code.co_filename
    if blame == "direct":
        return None if trusted(frame) else frame
    follow = _FOLLOW_GRAB if blame == "grab" else _FOLLOW_ATTR
    if blame in ("grab", "attr") and _is_stdlib(filename) and not filename.endswith(follow):
        return None  # stdlib bookkeeping (namedtuple, logging, typing, enum, tracebacks)
    first = _first_non_stdlib(frame)
    if first is None or trusted(first):
        return None
    return first


def _where(frame: FrameType) -> str:
    return f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"


def _classify(event: str, args: tuple[Any, ...], allowed: tuple[str, ...]) -> Event | None:
    """What an audit event means, or None when it is of no interest (the fast path)."""
    if event in _PROCESS_EVENTS:
        return "process_spawned", "reject", f"starts a process or sends a signal ({event})"
    if event.startswith("socket."):
        return "network", "reject", f"uses sockets ({event})"
    if event.startswith("ctypes."):
        return "ctypes", "reject", f"uses ctypes ({event}): raw memory access"
    if event in _FRAME_EVENTS or (event == "object.__getattr__" and len(args) > 1
                                  and args[1] in _FRAME_ATTRS):
        return "frame_access", "reject", "grabs interpreter frames (they reach the harness)"
    if event in _GC_EVENTS:
        return "gc_walk", "reject", f"walks the garbage collector ({event})"
    if event in _TRACE_EVENTS:
        return "tracing", "reject", f"installs a trace, profile or audit hook ({event})"
    if event == "object.__setattr__" and len(args) > 1 and args[1] == "__code__":
        return "patching", "reject", "replaces a function's code object"
    if event in ("compile", "code.__new__") and len(args) > 1 and _library_name(args[1]):
        return "forged_filename", "reject", (f"makes code that claims to be library code "
                                             f"({args[1]!r}), to pass for trusted frames")
    if event == "open":
        return _classify_open(args, allowed)
    if event in _PATH_EVENTS and args and not _inside(args[0], allowed):
        return "file_write", "reject", f"changes files outside its temp dir ({event} {args[0]!r})"
    return None


def _classify_open(args: tuple[Any, ...], allowed: tuple[str, ...]) -> Event | None:
    path, mode, flags = [*args, None, None, 0][:3]
    if not isinstance(path, str | bytes | os.PathLike):
        return None
    text = os.fsdecode(path)
    if text.startswith("/proc/") and text.endswith(("/mem", "/environ", "/maps")):
        return "memory_read", "reject", f"opens {text}: reads the process's memory or environment"
    writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or \
        (mode is None and isinstance(flags, int) and flags & _WRITE_FLAGS)
    if writes and not _inside(text, allowed):
        return "file_write", "reject", f"writes {text} (outside its temp dir)"
    return None


def _library_name(filename: Any) -> bool:
    if isinstance(filename, bytes):
        filename = os.fsdecode(filename)
    return isinstance(filename, str) and not filename.startswith("<") and _is_trusted(filename)


def _inside(path: Any, roots: tuple[str, ...]) -> bool:
    if not isinstance(path, str | bytes | os.PathLike):
        return True
    real = os.path.realpath(os.fsdecode(path))
    return real == os.devnull or any(real.startswith(r) for r in roots)


class Guard:
    """Runtime watch installed before the candidate runs (audit hook, threads, streams)."""

    def __init__(self, allowed_write_dirs: Iterable[str] = (),
                 trusted_dirs: Iterable[str] = ()) -> None:
        dirs = [tempfile.gettempdir(), *allowed_write_dirs]
        self._allowed = tuple(os.path.realpath(d) + os.sep for d in dirs)
        self._extra_trusted = tuple(os.path.realpath(d) + os.sep for d in trusted_dirs)
        self._flags: dict[tuple[str, str], Flag] = {}
        self._active = True
        self._local = threading.local()
        self._threads0 = {t.ident for t in threading.enumerate()}
        self._trusted_threads: weakref.WeakSet[threading.Thread] = weakref.WeakSet()
        self._undo: list[Callable[[], None]] = []
        self._stream0: Any = None
        self._baseline: Any = None
        self._streams: list[str] = []  # where candidate code created CUDA streams
        self._graphs: list[str] = []  # ... and CUDA graphs
        sys.addaudithook(self._hook)
        self._wrap_thread_start()
        self._wrap_streams()
        self._bind_snapshots()

    def _bind_snapshots(self) -> None:
        """Baseline of library and harness functions, taken before any candidate code runs;
        the functions are bound here so that patching the module attributes does not blind
        ``findings()``."""
        if "torch" not in sys.modules:
            return
        from evaluator import snapshots  # torch-heavy: only inside a worker that has torch

        self._snapshot, self._diff = snapshots.snapshot_globals, snapshots.diff_globals
        self._current_stream = snapshots.current_stream
        self._baseline = self._snapshot()

    # -- public ----------------------------------------------------------------------------
    def lock_down(self) -> None:
        """Called after the candidate is imported and built: marks the stream the timing
        expects. (Candidate code is refused processes, sockets, ctypes, frame/gc walking and
        writes outside its dirs from the moment the guard is installed.)"""
        if self._baseline is not None:
            self._stream0 = self._current_stream()

    def findings(self) -> list[Flag]:
        """Everything seen so far, and every library or harness function replaced since the
        guard was installed (import-time patches included: the worker dedupes repeats)."""
        flags = list(self._flags.values())
        flags += self._live_threads()
        flags += self._stream_flags()
        if self._baseline is not None:
            flags += self._diff(self._baseline, self._snapshot())
            stream = self._current_stream()
            if self._stream0 is not None and stream is not None and stream != self._stream0:
                flags.append(Flag("stream_changed", "the candidate left a different CUDA stream "
                                  "current: work there escapes per-stream timing"))
        return flags

    def close(self) -> None:
        """Disarm the hook and undo the wrappers (audit hooks themselves cannot be removed)."""
        self._active = False
        for undo in reversed(self._undo):
            undo()
        self._undo.clear()

    def __enter__(self) -> Guard:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- recording -------------------------------------------------------------------------
    def _record(self, code: str, severity: Severity, what: str, frame: FrameType) -> None:
        reason = f"{what} at {_where(frame)}"
        self._flags.setdefault((code, reason), Flag(code, reason, severity))
        # refused from the start, not from lock-down on: a write into another candidate's
        # cached build, or a process started at import time, must never happen at all
        if severity == "reject":
            raise PermissionError(f"blocked by the evaluator: the candidate {reason}")

    def _blame(self, frame: FrameType | None, blame: Blame = "first") -> FrameType | None:
        if getattr(self._local, "busy", False):
            return None
        self._local.busy = True
        try:
            return culprit(frame, blame=blame, extra_trusted=self._extra_trusted)
        finally:
            self._local.busy = False

    def _hook(self, event: str, args: tuple[Any, ...]) -> None:
        if not self._active or getattr(self._local, "busy", False):
            return
        meaning = _classify(event, args, self._allowed)
        if meaning is None:
            return
        code, severity, what = meaning
        self._local.busy = True
        try:
            caller = sys._getframe(1)
        finally:
            self._local.busy = False
        blame = "attr" if event == "object.__getattr__" else _BLAME.get(code, "first")
        frame = self._blame(caller, blame)
        if frame is not None:
            self._record(code, severity, what, frame)

    # -- threads ---------------------------------------------------------------------------
    def _wrap_thread_start(self) -> None:
        for module, name in ((threading, "_start_new_thread"), (_thread, "start_new_thread"),
                             (threading, "_start_joinable_thread"),
                             (_thread, "start_joinable_thread")):
            original = getattr(module, name, None)
            if original is None:
                continue
            setattr(module, name, self._thread_starter(original))
            self._undo.append(functools.partial(setattr, module, name, original))

    def _thread_starter(self, original: Callable[..., Any]) -> Callable[..., Any]:
        guard = self

        def start(function: Any, *args: Any, **kwargs: Any) -> Any:
            frame = guard._blame(sys._getframe(1)) if guard._active else None
            if frame is not None:
                guard._record("thread_spawned", "reject", "starts a thread (work can finish "
                              "after the timer stops)", frame)
            owner = getattr(function, "__self__", None)
            if frame is None and isinstance(owner, threading.Thread):
                guard._trusted_threads.add(owner)
            return original(function, *args, **kwargs)

        return start

    def _live_threads(self) -> list[Flag]:
        flags = []
        for t in threading.enumerate():
            if t.ident in self._threads0 or t in self._trusted_threads or not t.is_alive():
                continue
            flags.append(Flag("thread_alive", f"a thread the candidate started is still running "
                              f"({t.name})"))
        return flags

    # -- streams ---------------------------------------------------------------------------
    # Streams are recorded, never refused: CUDA graph capture needs a side stream (PyTorch's
    # documented warm-up creates one in user code, usually in the first forward). A stream the
    # candidate created is a reject finding unless the candidate also built a CUDA graph; either
    # way the timing synchronises the whole device, so side-stream work is counted.
    def _wrap_streams(self) -> None:
        torch = sys.modules.get("torch")
        if torch is None:
            return
        targets = [(torch.cuda.Stream, self._streams),
                   (getattr(torch.cuda, "ExternalStream", None), self._streams),
                   (getattr(torch.cuda, "CUDAGraph", None), self._graphs)]
        for cls, sink in targets:
            original = cls.__dict__.get("__new__") if cls is not None else None
            if original is None:
                continue
            setattr(cls, "__new__", self._recording_new(original, sink))  # noqa: B010
            self._undo.append(functools.partial(setattr, cls, "__new__", original))

    def _recording_new(self, original: Callable[..., Any], sink: list[str]
                       ) -> Callable[..., Any]:
        guard = self

        def new(cls: type, *args: Any, **kwargs: Any) -> Any:
            frame = guard._blame(sys._getframe(1)) if guard._active else None
            if frame is not None:
                sink.append(_where(frame))
            return original(cls, *args, **kwargs)

        return new

    def _stream_flags(self) -> list[Flag]:
        if not self._streams:
            return []
        where = ", ".join(dict.fromkeys(self._streams))
        if self._graphs:
            return [Flag("side_stream", f"creates a CUDA stream next to CUDA graph capture "
                         f"({where}); timing synchronises the whole device", "warn")]
        return [Flag("side_stream", f"creates a CUDA stream ({where}): work there can escape "
                     "per-stream timing")]


def install(allowed_write_dirs: Iterable[str] = (), trusted_dirs: Iterable[str] = ()) -> Guard:
    return Guard(allowed_write_dirs, trusted_dirs)
