"""Runtime integrity checks used inside the evaluator's worker process.

INTERFACE FIRST: the worker (evaluator core) calls these at fixed points; the
bodies are filled in by the integrity work. Each returns ``Flag``s.

Call order in the worker:
    guard = install_guards()                 # before the candidate is imported
    before = snapshot_globals()              # after harness imports, before candidate
    settings0 = snapshot_settings()
    ... import candidate (compile) ...
    flags += diff_globals(before, snapshot_globals())
    flags += check_candidate_namespace(problem_ns, candidate_ns)
    flags += check_outputs(outputs, expected)   # per trial, before numeric comparison
    flags += guard.findings()                # threads, streams, audit events seen
    changed = diff_settings(settings0, snapshot_settings()); restore_settings(settings0)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from evaluator.schema import Flag


@dataclass
class GlobalsSnapshot:
    ids: dict[str, int] = field(default_factory=dict)


@dataclass
class SettingsSnapshot:
    values: dict[str, Any] = field(default_factory=dict)


class Guard:
    """Runtime watch installed before the candidate runs (audit hook, threads, streams)."""

    def findings(self) -> list[Flag]:
        return []

    def lock_down(self) -> None:
        """Called after the candidate is imported and built: from now on no subprocess,
        socket, ctypes or frame/gc walking is allowed."""


def install_guards() -> Guard:
    return Guard()


def snapshot_globals() -> GlobalsSnapshot:
    return GlobalsSnapshot()


def diff_globals(before: GlobalsSnapshot, after: GlobalsSnapshot) -> list[Flag]:
    return []


def snapshot_settings() -> SettingsSnapshot:
    return SettingsSnapshot()


def diff_settings(before: SettingsSnapshot, after: SettingsSnapshot) -> dict[str, Any]:
    return {}


def restore_settings(snapshot: SettingsSnapshot) -> None:
    return None


def check_candidate_namespace(problem_ns: dict[str, Any], candidate_ns: dict[str, Any]) -> list[Flag]:
    return []


def check_outputs(outputs: Any, expected: Any) -> list[Flag]:
    return []
