"""What a verdict says beyond its status, rendered once for the CLI and the TUI alike.

The parse error (a reply without usable code), the evaluator's message (for a timed ``ok``,
the two times its speedup is the ratio of), every integrity flag
with its severity, and the compiler's output when the candidate did not compile.
"""

from __future__ import annotations

from rich.text import Text

from cudal1_evaluator.plain_text import shown
from cudal1_evaluator.schema import Flag, Result
from cudal1_tui.measurements import basis_text
from cudal1_tui.records import CandidateRecord

COMPILE_TAIL_LINES = 30
LOG_COMPILE_TAIL_LINES = 80  # a scrolling log keeps more of the compiler's output
SEVERITY_STYLE = {"reject": "red", "warn": "yellow", "info": "dim"}


def flag_line(flag: Flag) -> Text:
    return Text(shown(f"integrity {flag.severity}: {flag.code}: {flag.reason}"),
                style=SEVERITY_STYLE.get(flag.severity, "red"))


def verdict_details(result: Result, *, parse_error: str = "",
                    compile_tail: int | None = COMPILE_TAIL_LINES) -> Text:
    """The lines that explain ``result`` (empty for a clean ``ok``); ``compile_tail`` keeps
    the compile log's last lines (None: all of it)."""
    # shown: the candidate wrote parts of these, and a trace may predate the evaluator's own
    lines = [Text(shown(line)) for line in (parse_error, _message(result)) if line]
    lines += [flag_line(flag) for flag in result.flags]
    log = result.compile_log.strip()
    if log and result.status == "compile_error":
        kept = log.splitlines()[-compile_tail:] if compile_tail else log.splitlines()
        lines.append(Text(shown("\n".join(kept)), style="dim"))
    return Text("\n").join(lines)


def _message(result: Result) -> str:
    """The evaluator's message; for a timed ``ok``, the two times the speedup is the ratio of
    (the evaluator's own line rounds them differently and may name another reference)."""
    measured = basis_text(result) if result.status == "ok" else ""
    message = result.message.strip()
    rejects = [f.reason for f in result.flags if f.severity == "reject"]
    if result.status == "rejected" and rejects and all(r in message for r in rejects):
        return ""  # the message only lists the reject flags, which get a line each
    return measured or message


def record_details(record: CandidateRecord, compile_tail: int | None = COMPILE_TAIL_LINES) -> Text:
    """``verdict_details`` of a trace record."""
    return verdict_details(record.result, parse_error=record.parse_error,
                           compile_tail=compile_tail)
