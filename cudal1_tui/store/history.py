"""The accepted line as a git repository (gitpython).

The first commit holds the reference as ``model.py``; each accept commits a candidate
as ``model.py``; undo adds a revert commit (history is never rewritten). Commits carry
trailers (``Cudal1-Action``, ``Cudal1-Record``) from which the line is rebuilt.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import git

from cudal1_tui.errors import SessionError
from cudal1_tui.records import DecisionRecord
from cudal1_tui.store.naming import MODULE_FILE
from cudal1_tui.store.recovery import clear_stale_git_lock

# Explicit identity: works on machines with no global git config (CI).
ACTOR = git.Actor("cudal1-tui", "cudal1-tui@localhost")
ACTION_TRAILER = "Cudal1-Action"
RECORD_TRAILER = "Cudal1-Record"
NO_GIT_NOTE = "no git history (a recorded or copied session)"
GITIGNORE = "# only the optimized module is tracked; the rest is the session's store\n*\n" \
    f"!.gitignore\n!{MODULE_FILE}\n"


@dataclass(frozen=True)
class HistoryEntry:
    """One commit of the accepted line, newest first in ``History.log``."""

    sha: str
    action: str  # "reference", "accept" or "revert"
    record_id: str
    summary: str
    message: str
    committed_at: str


class History:
    """A session directory's git repository (``repo`` None: a trace-only folder, read-only)."""

    def __init__(self, repo: git.Repo | None) -> None:
        self._repo = repo
        self._log: list[HistoryEntry] | None = None  # cached; our own commits reset it
        self.damage = ""  # why the repository could not be read ("" while it can)
        self.notes: list[str] = []

    @classmethod
    def init(cls, directory: Path, reference_source: str, problem_name: str) -> History:
        try:
            repo = git.Repo.init(directory)
        except (git.GitCommandError, git.GitCommandNotFound, OSError) as exc:
            raise SessionError(f"cannot create a git repository in {directory}: {exc}",
                               fix="install git and check the directory is writable") from None
        with repo.config_writer() as cfg:  # so `git revert` by hand works there too
            cfg.set_value("user", "name", ACTOR.name)
            cfg.set_value("user", "email", ACTOR.email)
        history = cls(repo)
        (directory / ".gitignore").write_text(GITIGNORE, encoding="utf-8")
        message = _message(f"Reference: {problem_name}", "", "reference", "")
        history._commit(reference_source, message, extra=[".gitignore"])
        return history

    @classmethod
    def open(cls, directory: Path, *, optional: bool = False) -> History:
        """The directory's repository; with ``optional``, an empty history when it has none."""
        try:
            return cls(git.Repo(directory))
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            if optional:
                return cls(None)
            raise SessionError(f"{directory} has no git history",
                               fix="the session is damaged; start a new one") from None
        except Exception as exc:  # a damaged .git: readers still get the trace
            if not optional:
                raise SessionError(f"{directory}: the git repository cannot be opened "
                                   f"({_first_line(exc)})",
                                   fix="the session is damaged; `cudal1-tui show` reads "
                                   "what is intact") from None
            history = cls(None)
            history.damage = f"the git repository cannot be opened ({_first_line(exc)})"
            return history

    def close(self) -> None:
        """End gitpython's persistent helpers (``git cat-file --batch``) of this repository."""
        if self._repo is not None:
            self._repo.close()

    @property
    def has_git(self) -> bool:
        return self._repo is not None

    @property
    def readable(self) -> bool:
        """A repository whose log can be read (a missing object makes it unreadable)."""
        self.log()
        return self._repo is not None and not self.damage

    @property
    def repo(self) -> git.Repo:
        if self._repo is None:
            raise SessionError(NO_GIT_NOTE, fix="changes need the session's git repository: "
                               "copy the folder with its .git")
        return self._repo

    def commit_accept(self, code: str, subject: str, body: str, record_id: str) -> str:
        return self._commit(code, _message(subject, body, "accept", record_id))

    def revert_last_accept(self) -> tuple[str, str] | None:
        """Restore ``model.py`` as it was before the newest live accept.

        Returns (revert sha, undone record id), or None when nothing is accepted.
        """
        stack = self._accept_stack()
        if not stack:
            return None
        top = stack[-1]
        commit = self.repo.commit(top.sha)
        before_bytes: bytes = (commit.parents[0].tree / MODULE_FILE).data_stream.read()
        before = before_bytes.decode("utf-8")
        message = _message(f'Revert "{top.summary}"', f"This reverts commit {top.sha}.",
                           "revert", top.record_id)
        return self._commit(before, message), top.record_id

    def accepted(self) -> HistoryEntry | None:
        """The newest accept that has not been reverted."""
        stack = self._accept_stack()
        return stack[-1] if stack else None

    def accepted_line(self) -> list[HistoryEntry]:
        """The live accepts, oldest first (reverted ones dropped)."""
        return self._accept_stack()

    def log(self) -> list[HistoryEntry]:
        """Every commit, newest first."""
        if self._repo is None or self.damage:
            return []
        if self._log is None:
            try:
                self._log = [_entry(c) for c in self._repo.iter_commits()]
            except Exception as exc:  # gitpython raises a zoo (GitCommandError, ValueError...)
                self.damage = f"the git history cannot be read ({_first_line(exc)})"
                return []
        return list(self._log)

    def module_source(self) -> str:
        data: bytes = (self.repo.head.commit.tree / MODULE_FILE).data_stream.read()
        return data.decode("utf-8")

    def _accept_stack(self) -> list[HistoryEntry]:
        stack: list[HistoryEntry] = []
        for entry in reversed(self.log()):
            if entry.action == "accept":
                stack.append(entry)
            elif entry.action == "revert" and stack:
                stack.pop()
        return stack

    def _commit(self, code: str, message: str, extra: list[str] | None = None) -> str:
        workdir = Path(self.repo.working_tree_dir or ".")
        if note := clear_stale_git_lock(workdir):  # safe: the writer holds the session lock
            self.notes.append(note)
        (workdir / MODULE_FILE).write_text(code, encoding="utf-8")
        self.repo.index.add([MODULE_FILE, *(extra or [])])
        # the app's records, not the user's work: hooks (a global hooks path, an init
        # template's) that refuse commits, a linter or a signing policy, must not fail an accept
        commit = self.repo.index.commit(message, author=ACTOR, committer=ACTOR,
                                        skip_hooks=True)
        self._log = None
        return str(commit.hexsha)


def accepted_record_id(history: History, decisions: Sequence[DecisionRecord]) -> str:
    """The record ``model.py`` holds: from git, else folded from the trace's decisions."""
    if history.has_git and history.readable:
        live = history.accepted()
        return live.record_id if live else ""
    stack: list[str] = []
    for decision in decisions:
        if decision.decision == "accepted" and decision.record_id not in stack[-1:]:
            stack.append(decision.record_id)
        elif decision.decision == "undone" and stack and stack[-1] == decision.record_id:
            stack.pop()
    return stack[-1] if stack else ""


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200]}" if text else type(exc).__name__


def _message(subject: str, body: str, action: str, record_id: str) -> str:
    trailers = f"{ACTION_TRAILER}: {action}"
    if record_id:
        trailers += f"\n{RECORD_TRAILER}: {record_id}"
    parts = [subject.strip(), body.strip(), trailers]
    return "\n\n".join(p for p in parts if p) + "\n"


def _trailer(message: str, key: str) -> str:
    for line in reversed(message.splitlines()):
        if line.startswith(f"{key}: "):
            return line.split(": ", 1)[1].strip()
    return ""


def _entry(commit: git.Commit) -> HistoryEntry:
    message = commit.message if isinstance(commit.message, str) else commit.message.decode()
    return HistoryEntry(
        sha=str(commit.hexsha),
        action=_trailer(message, ACTION_TRAILER) or "other",
        record_id=_trailer(message, RECORD_TRAILER),
        summary=message.splitlines()[0] if message else "",
        message=message,
        committed_at=commit.committed_datetime.isoformat(timespec="seconds"),
    )
