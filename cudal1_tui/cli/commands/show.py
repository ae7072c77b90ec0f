"""``cudal1-tui show SESSION``: a session's candidates, verdicts and best speedup."""

from __future__ import annotations

import argparse
import json
from typing import Any, TypedDict

from rich.console import Console
from rich.table import Table

from cudal1_tui.cli.options import add_settings_flags, settings_from_args
from cudal1_tui.cli.session_refs import resolve_ref
from cudal1_tui.config import sessions_dir
from cudal1_tui.present.speedup import DASH, speed_text
from cudal1_tui.records import CandidateRecord
from cudal1_tui.store import Session
from cudal1_tui.uncertainty import interval_text, noisy, precision_text, speedup_interval

NAME = "show"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(NAME, help="show one session")
    parser.add_argument("session", help="session id, unique prefix or path")
    parser.add_argument("--json", action="store_true", help="print JSON")
    add_settings_flags(parser)
    parser.set_defaults(handler=run)


class CandidateRow(TypedDict):
    """One candidate in ``show --json``."""

    record_id: str
    round: int
    slot: int
    source: str
    status: str
    speedup: float | None
    speedup_interval: tuple[float, float] | None
    noisy: bool
    speedup_strict: float | None
    precision: object
    reward: float
    flags: list[str]
    decision: str


class HistoryRow(TypedDict):
    sha: str
    action: str
    record_id: str
    summary: str
    at: str


class SessionJson(TypedDict):
    """What ``show --json`` prints."""

    session: dict[str, Any]  # the session's meta.json, minus the problem source
    path: str
    candidates: list[CandidateRow]
    best: str | None
    accepted: str | None
    history: list[HistoryRow]
    warnings: list[str]
    notes: list[str]


def candidate_row(r: CandidateRecord) -> CandidateRow:
    return {"record_id": r.record_id, "round": r.round, "slot": r.slot, "source": r.source,
            "status": r.status, "speedup": r.speedup,
            "speedup_interval": speedup_interval(r.result), "noisy": noisy(r.result),
            "speedup_strict": r.result.speedup_strict,
            "precision": r.result.precision, "reward": r.reward,
            "flags": r.flag_codes(include_info=True), "decision": r.decision}


def _as_json(session: Session) -> SessionJson:
    meta = session.meta.to_dict()
    meta.pop("problem_source", None)
    best, accepted = session.best(), session.accepted()
    return {
        "session": meta,
        "path": str(session.path),
        "candidates": [candidate_row(r) for r in session.records()],
        "best": best.record_id if best else None,
        "accepted": accepted.record_id if accepted else None,
        "history": [{"sha": e.sha, "action": e.action, "record_id": e.record_id,
                     "summary": e.summary, "at": e.committed_at}
                    for e in session.history_log()],
        "warnings": session.warnings,
        "notes": session.notes,
    }


COLUMNS = ("round", "slot", "record", "source", "status", "speedup", "p10–p90", "reward",
           "flags", "decision")
NARROW_COLUMNS = ("rnd", "source", "status", "speedup", "decision")  # 80 columns: whole words
NARROW = 140


def _candidates_table(session: Session, width: int = 200) -> Table:
    narrow = width < NARROW
    table = Table(title=f"{session.id} — {session.meta.problem_name}", title_justify="left")
    for column in NARROW_COLUMNS if narrow else COLUMNS:
        table.add_column(column, overflow="fold",
                         no_wrap=column not in ("source", "flags", "speedup"))
    for r in session.records():
        status = f"[green]{r.status}[/]" if r.status == "ok" else f"[red]{r.status}[/]"
        if narrow:
            table.add_row(f"{r.round}.{r.slot}", r.source, status, _speedup(r), r.decision)
            continue
        table.add_row(str(r.round), str(r.slot), r.record_id, r.source, status,
                      _speedup(r), interval_text(r.result), f"{r.reward:.3g}",
                      ",".join(r.flag_codes(include_info=True)),
                      r.decision)
    return table


def _speedup(r: CandidateRecord) -> str:
    text = precision_text(r.result, r.speedup) if r.speedup is not None else speed_text(None, DASH)
    return f"[yellow]{text} (noisy)[/]" if noisy(r.result) else text


def _print(console: Console, session: Session) -> None:
    meta = session.meta
    console.print(f"[bold]{meta.problem_name}[/]  {meta.problem_path}\n"
                  f"session {session.id}  created {meta.created_at}  model {meta.model or '-'}\n"
                  f"folder  {session.path}")
    for warning in session.warnings:
        console.print(f"[yellow]warning:[/] {warning}")
    for note in session.notes:
        console.print(f"note: {note}", highlight=False)
    console.print(_candidates_table(session, console.width))
    if console.width < NARROW:
        console.print("(a narrow terminal: `cudal1-tui show SESSION --json` has every field)",
                      style="dim")
    best = session.best()
    console.print(f"best: {speed_text(best.speedup, DASH) if best else '-'}"
                  f"{f' ({best.record_id})' if best else ''}")
    if not session.history.has_git:
        accepted = session.accepted()
        console.print(f"[bold]accepted[/] (from the trace): "
                      f"{accepted.record_id if accepted else '-'}", highlight=False)
        return
    console.print("[bold]accepted line[/] (git log, newest first):")
    for entry in session.history_log():
        console.print(f"  {entry.sha[:10]}  {entry.summary}", highlight=False)


def run(args: argparse.Namespace) -> int:
    root = sessions_dir(settings_from_args(args).settings)
    ref = resolve_ref(args.session, root)
    with Session.open(ref, root, readonly=True) as session:
        if args.json:
            print(json.dumps(_as_json(session), indent=2))
        else:
            _print(Console(), session)
    return 0
