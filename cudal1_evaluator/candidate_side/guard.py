"""The runtime watch over candidate code inside the worker: audit hook, threads, streams.

Attribution is by origin (``candidate_side.origin``): an event is the candidate's when the first
frame outside the standard library is candidate code (its module, code it compiled, files under
its own dirs), or when a library on top was only relaying for candidate code below it (handed
``gc.get_referrers`` to call). A library doing its own work for the candidate (``load_inline``
running the compiler, Triton calling ``ptxas``, inductor starting compile threads) is its own
business. Frame grabs by stdlib helpers (``namedtuple``, ``logging``) are bookkeeping, except
through ``inspect``/``traceback``, which are followed to the code that asked.

Candidate events are refused from the moment the guard is installed (the audited call raises
``PermissionError``) and recorded. Audit hooks cannot be removed: ``close()`` only disarms this
one (tests install and close guards in one process).
"""

from __future__ import annotations

import _thread
import functools
import os
import sys
import tempfile
import threading
import weakref
from collections.abc import Callable, Iterable
from types import FrameType
from typing import Any

from cudal1_evaluator.candidate_side.origin import (
    FILE_EVENTS,
    Blame,
    Origins,
    culprit,
    executable_of,
)
from cudal1_evaluator.isolation import confine
from cudal1_evaluator.schema import Flag, Severity

_PROCESS_EVENTS = frozenset({"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn",
                             "os.spawn", "os.fork", "os.forkpty", "pty.spawn", "os.kill",
                             "os.killpg", "os.startfile"})
_FRAME_EVENTS = frozenset({"sys._getframe", "sys._current_frames"})
_FRAME_ATTRS = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_back"})
_GC_EVENTS = frozenset({"gc.get_objects", "gc.get_referrers", "gc.get_referents"})
_TRACE_EVENTS = frozenset({"sys.settrace", "sys.setprofile", "sys.addaudithook",
                           "sys.monitoring.register_callback"})
_PATH_EVENTS = FILE_EVENTS - {"open"}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC

Event = tuple[str, Severity, str]  # (flag code, severity, what happened)
_BLAME: dict[str, Blame] = {"frame_access": "grab", "forged_filename": "direct"}
_COMPILE_EVENTS = frozenset({"compile", "exec", "code.__new__"})


def _where(frame: FrameType) -> str:
    return f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"


def _classify(event: str, args: tuple[Any, ...], allowed: tuple[str, ...],
              origins: Origins) -> Event | None:
    """What an audit event means, or None when it is of no interest (the fast path)."""
    if event in _PROCESS_EVENTS:
        program = executable_of(event, args)
        return "process_spawned", "reject", ("starts a process or sends a signal "
                                             f"({event}{': ' + program if program else ''})")
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
    if event in ("compile", "code.__new__") and len(args) > 1 and \
            origins.claims_other_file(args[1]):
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


def _inside(path: Any, roots: tuple[str, ...]) -> bool:
    if not isinstance(path, str | bytes | os.PathLike):
        return True
    real = os.path.realpath(os.fsdecode(path))
    return real == os.devnull or any(real.startswith(r) for r in roots)


class Guard:
    """Runtime watch installed before the candidate runs (audit hook, threads, streams)."""

    def __init__(self, allowed_write_dirs: Iterable[str] = (),
                 trusted_dirs: Iterable[str] = (), *,
                 candidate_paths: Iterable[str] = ()) -> None:
        own = [*allowed_write_dirs]
        dirs = [tempfile.gettempdir(), *own]
        self._allowed = tuple(os.path.realpath(d) + os.sep for d in dirs)
        paths = [*candidate_paths]
        self.origins = Origins(dirs=own + [p for p in paths if os.path.isdir(p)],
                               files=[p for p in paths if not os.path.isdir(p)],
                               never=trusted_dirs)
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
        from cudal1_evaluator.candidate_side import (
            snapshots,  # torch-heavy: only inside a worker that has torch
        )

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
        confinement = confine.current()
        if confinement is not None:
            flags.append(Flag("sandbox", confinement.summary(), "info"))
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

    def _blame(self, frame: FrameType | None, blame: Blame = "first", event: str = "",
               args: tuple[Any, ...] = ()) -> FrameType | None:
        if getattr(self._local, "busy", False):
            return None
        self._local.busy = True
        try:
            return culprit(frame, self.origins, blame=blame, event=event, args=args)
        finally:
            self._local.busy = False

    def _hook(self, event: str, args: tuple[Any, ...]) -> None:
        if not self._active or getattr(self._local, "busy", False):
            return
        if event in _COMPILE_EVENTS:
            self._note_compiled(event, args)
        meaning = _classify(event, args, self._allowed, self.origins)
        if meaning is None:
            return
        code, severity, what = meaning
        self._local.busy = True
        try:
            caller = sys._getframe(1)
        finally:
            self._local.busy = False
        blame = "attr" if event == "object.__getattr__" else _BLAME.get(code, "first")
        frame = self._blame(caller, blame, event, args)
        if frame is not None:
            self._record(code, severity, what, frame)

    def _note_compiled(self, event: str, args: tuple[Any, ...]) -> None:
        """Code the candidate compiles itself is candidate code, whatever it calls its file."""
        self._local.busy = True
        try:
            caller = sys._getframe(2)
            if not self.origins.is_candidate(caller.f_code.co_filename):
                return
            if event == "exec":
                self.origins.note_compiled(getattr(args[0] if args else None, "co_filename", None))
            elif len(args) > 1 and not self.origins.claims_other_file(args[1]):
                self.origins.note_compiled(args[1])  # a forged name is refused, not adopted
        finally:
            self._local.busy = False

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
            frame = guard._blame(sys._getframe(1), event="thread.start",
                                 args=(function,)) if guard._active else None
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
            frame = guard._blame(sys._getframe(1), event="cuda.stream") if guard._active \
                else None
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


def install(allowed_write_dirs: Iterable[str] = (), trusted_dirs: Iterable[str] = (), *,
            candidate_paths: Iterable[str] = ()) -> Guard:
    return Guard(allowed_write_dirs, trusted_dirs, candidate_paths=candidate_paths)
