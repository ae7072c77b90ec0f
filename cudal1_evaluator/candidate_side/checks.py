"""Every harness function the worker calls after the candidate is imported, bound at setup.

The worker reaches its checks through one ``Checks`` captured before the candidate runs, never
through module attributes: a candidate that replaces ``candidate_side.integrity.check_outputs`` or
``common.compare.compare_outputs`` at import time changes nothing the worker calls (and the
guard's own baseline reports the patch).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cudal1_evaluator.candidate_side import integrity, profiling
from cudal1_evaluator.common import compare, harness, timing
from cudal1_evaluator.parent import build_cache as build
from cudal1_evaluator.verdict_details import ProfileSummary, SettingsChanged


@dataclass(frozen=True)
class Checks:
    snapshot_globals: Callable[[], integrity.GlobalsSnapshot]
    diff_globals: Callable[..., list[Any]]
    check_namespace: Callable[..., list[Any]]
    check_outputs: Callable[..., list[Any]]
    snapshot_settings: Callable[[], integrity.SettingsSnapshot]
    diff_settings: Callable[..., SettingsChanged]
    restore_settings: Callable[[integrity.SettingsSnapshot], None]
    restore_call_settings: Callable[[integrity.SettingsSnapshot], None]
    compare_outputs: Callable[..., compare.Comparison]
    clone_inputs: Callable[[list[Any]], list[Any]]
    same_inputs: Callable[[list[Any], list[Any]], bool]
    poison: Callable[..., None]
    describe_exception: Callable[..., str]
    load_matching_state: Callable[..., int]
    looks_like_build_error: Callable[[str], bool]
    trim_compile_log: Callable[..., str]
    headline: Callable[[str], str]
    interleaved: Callable[..., dict[str, list[float]]]
    kernels_of: Callable[..., list[Any]]
    profile_summary: Callable[..., tuple[ProfileSummary, list[Any]]]
    handled_exceptions: Callable[..., list[str]]


def capture() -> Checks:
    """Bind the functions as they are now (call it before the candidate is imported)."""
    return Checks(
        snapshot_globals=integrity.snapshot_globals,
        diff_globals=integrity.diff_globals,
        check_namespace=integrity.check_candidate_namespace,
        check_outputs=integrity.check_outputs,
        snapshot_settings=integrity.snapshot_settings,
        diff_settings=integrity.diff_settings,
        restore_settings=integrity.restore_settings,
        restore_call_settings=integrity.restore_call_settings,
        compare_outputs=compare.compare_outputs,
        clone_inputs=compare.clone_inputs,
        same_inputs=compare.same_inputs,
        poison=compare.poison,
        describe_exception=harness.describe_exception,
        load_matching_state=harness.load_matching_state,
        looks_like_build_error=build.looks_like_build_error,
        trim_compile_log=build.trim_compile_log,
        headline=build.headline,
        interleaved=timing.interleaved,
        kernels_of=profiling.kernels_of,
        profile_summary=profiling.summarize,
        handled_exceptions=profiling.handled_exceptions,
    )
