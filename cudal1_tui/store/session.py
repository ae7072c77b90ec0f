"""A session: its directory, trace, candidate files and accepted line (git).

Layout of ``<sessions_dir>/<session_id>/``::

    session.json   what the session is about (SessionMeta)
    trace.jsonl    every candidate and decision, append-only
    candidates/    r{round:03d}_s{slot}_{record_id}.py, each candidate's code
    problem.py     the pristine reference
    model.py       the optimized module, tracked by git (the accepted line)
    session.lock   held by the one process writing the session
"""

from __future__ import annotations

import functools
import shutil
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar, cast

from cudal1_tui.config import Settings, sessions_dir
from cudal1_tui.errors import SessionError
from cudal1_tui.measurements import candidate_ms, reference_ms
from cudal1_tui.records import CandidateRecord, Decision, DecisionRecord
from cudal1_tui.store import naming
from cudal1_tui.store.history import NO_GIT_NOTE, History, HistoryEntry, accepted_record_id
from cudal1_tui.store.listing import resolve_session
from cudal1_tui.store.lock import SessionLock, unwritable
from cudal1_tui.store.meta import SessionMeta, settings_snapshot, write_meta
from cudal1_tui.store.recovery import load_meta, restore_candidate_files, restore_meta
from cudal1_tui.store.trace import TraceWriter, fold_decisions, read_trace

F = TypeVar("F", bound=Callable[..., Any])


def _locked(method: F) -> F:
    """Serialize a writing method: trace rows and git commits from several threads."""

    @functools.wraps(method)
    def wrapper(self: Session, *args: Any, **kwargs: Any) -> Any:
        with self._mutex:
            return method(self, *args, **kwargs)

    return cast(F, wrapper)


class Session:
    """Open with ``Session.create`` or ``Session.open``; close (or use ``with``) when done.

    A writable session holds the session lock; a read-only one (``readonly=True``) can be
    opened while another process writes, and refuses every change.
    """

    def __init__(self, path: Path, meta: SessionMeta, history: History, readonly: bool) -> None:
        self.path = path
        self.meta = meta
        self.history = history
        self.readonly = readonly
        self.warnings: list[str] = []
        self.notes: list[str] = [] if history.has_git else [NO_GIT_NOTE]
        self._lock = SessionLock(path / naming.LOCK_FILE)
        self._writer = TraceWriter(path / naming.TRACE_FILE)
        self._candidates: dict[str, CandidateRecord] = {}
        self._decisions: list[DecisionRecord] = []
        self._mutex = threading.RLock()  # the engine's workers may record from several threads

    # -- opening -------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        problem_path: str | Path,
        problem_source: str,
        settings: Settings,
        meta: SessionMeta | None = None,
        *,
        root: Path | None = None,
    ) -> Session:
        """A new session directory under ``root`` (default: ``sessions_dir(settings)``)."""
        meta = replace(meta) if meta else SessionMeta()
        meta.problem_path = str(Path(problem_path).expanduser().resolve())
        meta.problem_name = meta.problem_name or Path(problem_path).stem
        meta.problem_source = problem_source
        meta.created_at = meta.created_at or naming.now_iso()
        meta.settings = settings_snapshot(settings)
        meta.model = meta.model or settings.model
        path = _new_directory(root or sessions_dir(settings), meta.problem_name)
        meta.session_id = path.name
        try:
            (path / naming.CANDIDATES_DIR).mkdir()
            (path / naming.REFERENCE_FILE).write_text(problem_source, encoding="utf-8")
            (path / naming.TRACE_FILE).touch()
            history = History.init(path, problem_source, meta.problem_name)
            write_meta(path, meta)  # last: a directory without it is not a session
            session = cls(path, meta, history, readonly=False)
            session._start_writing()
        except BaseException:
            shutil.rmtree(path, ignore_errors=True)  # no half-made session left behind
            raise
        return session

    @classmethod
    def open(
        cls, ref: str | Path, sessions_root: Path | None = None, *, readonly: bool = False
    ) -> Session:
        """Open by id, unique id prefix, or path. Writable opens take the session lock.

        A read-only open also works on a folder without git (a recorded or copied session):
        its history is empty and the accepted candidate comes from the trace's decisions.
        """
        path = resolve_session(str(ref), sessions_root)
        history = History.open(path, optional=readonly)
        meta, meta_warning = load_meta(path)
        session = cls(path, meta, history, readonly=readonly)
        if readonly:
            session._load()
        else:
            session._start_writing()
            if meta_warning:
                restore_meta(path, meta)
            session._restore_candidates()
            session._reconcile_with_git()
            if history.damage:
                session.close()
                raise SessionError(f"session {path.name}: {history.damage}",
                                   fix="its trace is intact (`cudal1-tui show`, `export` read "
                                   "it); start a new session to go on")
        history.log()  # read once, so that any damage is known (and warned of) now
        session.warnings += [w for w in (meta_warning, history.damage) if w]
        return session

    def close(self) -> None:
        self._writer.close()
        self.history.close()
        self._lock.release()

    def __enter__(self) -> Session:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @property
    def id(self) -> str:
        return self.meta.session_id

    @property
    def reference_source(self) -> str:
        return (self.path / naming.REFERENCE_FILE).read_text(encoding="utf-8")

    # -- writing -------------------------------------------------------------------------

    @_locked
    def append_candidate(self, record: CandidateRecord) -> bool:
        """Write the candidate's code file and its trace row (on disk when this returns).

        Returns False (and writes nothing) when the record id is already in the trace.
        """
        self._check_writable()
        if record.record_id in self._candidates:
            return False
        record = replace(record, session_id=record.session_id or self.id)
        file = self.path / naming.CANDIDATES_DIR / naming.candidate_file(
            record.round, record.slot, record.record_id)
        file.parent.mkdir(exist_ok=True)  # deleted by hand: the trace holds every file's code
        file.write_text(record.code, encoding="utf-8")
        self._writer.append(record.to_dict())
        self._candidates[record.record_id] = record
        return True

    @_locked
    def record_decision(self, record_id: str, decision: Decision) -> str:
        """Dispatch a decision; returns the commit sha it made, or ``""``."""
        if decision == "accepted":
            return self.accept(record_id)
        if decision == "rejected":
            self.reject(record_id)
            return ""
        if decision == "undone":
            live = self.history.accepted()
            if live is None or live.record_id != record_id:
                raise SessionError(f"{record_id} is not the last accepted candidate",
                                   fix="only the last accept can be undone")
            return self.undo() or ""
        raise SessionError(f"unknown decision {decision!r}",
                           fix="use accepted, rejected or undone")

    @_locked
    def accept(self, record_id: str) -> str:
        """Commit the candidate as ``model.py``; returns the commit sha."""
        self._check_writable()
        record = self.record(record_id)
        if record.status != "ok":
            raise SessionError(
                f"{record_id} did not pass verification (status {record.status}); "
                "only verified candidates can be accepted",
                fix="pick a candidate whose status is ok")
        live = self.history.accepted()
        if live is not None and live.record_id == record_id:
            return live.sha
        subject, body = _accept_message(record)
        sha = self.history.commit_accept(record.code, subject, body, record_id)
        self._append_decision(DecisionRecord(record_id, "accepted", commit=sha))
        return sha

    @_locked
    def reject(self, record_id: str) -> None:
        self._check_writable()
        self.record(record_id)
        live = self.history.accepted()
        if live is not None and live.record_id == record_id:
            raise SessionError(f"{record_id} is the accepted candidate",
                               fix="undo the accept first")
        self._append_decision(DecisionRecord(record_id, "rejected"))

    @_locked
    def undo(self) -> str | None:
        """Revert the last accept (a new commit); None when nothing is accepted."""
        self._check_writable()
        reverted = self.history.revert_last_accept()
        if reverted is None:
            return None
        sha, record_id = reverted
        self._append_decision(DecisionRecord(record_id, "undone", commit=sha))
        return sha

    @_locked
    def update_meta(self, **changes: Any) -> SessionMeta:
        """Change fields of ``session.json`` (e.g. device, versions, model once known)."""
        self._check_writable()
        unknown = set(changes) - set(SessionMeta.__dataclass_fields__)
        if unknown:
            raise SessionError(f"unknown session fields: {', '.join(sorted(unknown))}")
        self.meta = replace(self.meta, **changes)
        write_meta(self.path, self.meta)
        return self.meta

    # -- reading -------------------------------------------------------------------------

    def records(self) -> list[CandidateRecord]:
        """Every candidate in trace order, with its latest decision folded in."""
        return fold_decisions(list(self._candidates.values()), self._decisions)

    def decisions(self) -> list[DecisionRecord]:
        return list(self._decisions)

    def record(self, record_id: str) -> CandidateRecord:
        if record_id not in self._candidates:
            raise SessionError(f"no candidate {record_id!r} in session {self.id}",
                               fix="`cudal1-tui show SESSION` lists its candidates")
        return fold_decisions([self._candidates[record_id]], self._decisions)[0]

    def accepted(self) -> CandidateRecord | None:
        """The candidate ``model.py`` holds now (the git line's newest live accept)."""
        live = accepted_record_id(self.history, self._decisions)
        if live not in self._candidates:
            return None
        return self.record(live)

    def best(self) -> CandidateRecord | None:
        """The fastest verified candidate (earliest on ties)."""
        ok = [r for r in self.records() if r.status == "ok" and r.speedup is not None]
        return max(ok, key=lambda r: r.speedup or 0.0, default=None)

    def next_round(self) -> int:
        """Rounds are numbered from 1; a resumed engine continues here."""
        return max((r.round for r in self._candidates.values()), default=0) + 1

    def history_log(self) -> list[HistoryEntry]:
        return self.history.log()

    def candidate_path(self, record: CandidateRecord) -> Path:
        return self.path / naming.CANDIDATES_DIR / naming.candidate_file(
            record.round, record.slot, record.record_id)

    # -- internals -----------------------------------------------------------------------

    def _load(self) -> None:
        contents = read_trace(self.path / naming.TRACE_FILE)
        self._candidates = {c.record_id: c for c in contents.candidates}
        self._decisions = contents.decisions
        self.warnings = contents.warnings

    def _start_writing(self) -> None:
        self._lock.acquire()
        try:
            repaired = self._writer.open()
            self._load()  # read under the lock: the file can have grown meanwhile
            if repaired:
                self.warnings.append(repaired)
        except OSError as exc:
            self._lock.release()
            raise unwritable(self.path, exc) from None
        except BaseException:
            self._lock.release()
            raise

    def _restore_candidates(self) -> None:
        try:
            restored = restore_candidate_files(self.path, list(self._candidates.values()))
        except OSError as exc:
            raise unwritable(self.path, exc) from None
        if restored:
            self.warnings.append(f"{restored} candidate file(s) were missing: restored from "
                                 "the trace")

    def _reconcile_with_git(self) -> None:
        """A kill between a commit and its trace row: add the missing decision rows."""
        logged = {d.commit for d in self._decisions if d.commit}
        for entry in reversed(self.history.log()):
            if entry.sha in logged or entry.record_id not in self._candidates:
                continue
            decision: Decision = "accepted" if entry.action == "accept" else "undone"
            if entry.action in ("accept", "revert"):
                self._append_decision(DecisionRecord(entry.record_id, decision, commit=entry.sha,
                                                     at=entry.committed_at))

    def _append_decision(self, decision: DecisionRecord) -> None:
        decision.at = decision.at or naming.now_iso()
        self._writer.append(decision.to_dict())
        self._decisions.append(decision)

    def _check_writable(self) -> None:
        if self.readonly or not self._lock.held:
            raise SessionError(f"session {self.id} is open read-only",
                               fix="open it without readonly=True (and close other writers)")


def _new_directory(root: Path, problem_name: str) -> Path:
    try:
        root.mkdir(parents=True, exist_ok=True)
        for _ in range(10):
            path = root / naming.new_session_id(problem_name)
            try:
                path.mkdir()
                return path
            except FileExistsError:
                continue
    except OSError as exc:
        raise SessionError(f"cannot create a session under {root}: {exc}",
                           fix="set --sessions-dir to a writable directory") from None
    raise SessionError(f"cannot find a free session name under {root}")


def _accept_message(record: CandidateRecord) -> tuple[str, str]:
    speed = f"{record.speedup:.2f}x" if record.speedup is not None else "n/a"
    subject = f"Accept {record.record_id}: {speed} ({record.source}, round {record.round} " \
        f"slot {record.slot})"
    lines = [f"speedup: {speed}"]
    ref, cand = reference_ms(record.result), candidate_ms(record.result)
    if ref is not None and cand is not None:
        lines.append(f"median: reference {ref:.4g} ms, candidate {cand:.4g} ms")
    lines.append(f"reward: {record.reward:.4g} ({record.reward_formula})")
    analysis = record.sections.performance_analysis.strip()
    if analysis:
        lines += ["", "## Performance Analysis", "", analysis]
    return subject, "\n".join(lines)
