"""Short, readable error excerpts of a failed candidate, for the prompt and the UI."""

from __future__ import annotations

import re

from cudal1_evaluator.schema import Result

ERROR_MAX_CHARS = 1500
_ERROR_LINE = re.compile(r"\berror\b|Error:|FAILED", re.IGNORECASE)


def clip_text(text: str, max_chars: int) -> str:
    """Keep the head and tail of ``text`` (whole lines), with a note of what was cut."""
    text = text.strip()
    if len(text) <= max_chars:
        return text
    lines = text.splitlines()
    head: list[str] = []
    tail: list[str] = []
    used = 0
    head_budget = max_chars * 2 // 3
    for line in lines:
        if used + len(line) + 1 > head_budget:
            break
        head.append(line)
        used += len(line) + 1
    for line in reversed(lines[len(head) :]):
        if used + len(line) + 1 > max_chars:
            break
        tail.insert(0, line)
        used += len(line) + 1
    omitted = len(lines) - len(head) - len(tail)
    if not head and not tail:  # one enormous line
        return text[: max_chars // 2] + " … " + text[-max_chars // 4 :]
    return "\n".join([*head, f"… {omitted} lines omitted …", *tail])


def compile_log_excerpt(log: str, max_chars: int = ERROR_MAX_CHARS) -> str:
    """The lines that name errors (with one line of context each), else the log's head and tail."""
    lines = log.strip().splitlines()
    keep: list[int] = []
    for i, line in enumerate(lines):
        if _ERROR_LINE.search(line):
            keep.extend(j for j in (i - 1, i, i + 1) if 0 <= j < len(lines))
    if not keep:
        return clip_text(log, max_chars)
    picked = [lines[j] for j in sorted(set(keep))]
    return clip_text("\n".join(picked), max_chars)


def _trial_excerpt(result: Result) -> str:
    failed = [t for t in result.trials if not t.ok]
    if not failed:
        return ""
    worst = max(failed, key=lambda t: float(t.max_abs_err))
    text = (
        f"{len(failed)} of {len(result.trials)} correctness trials failed; "
        f"max abs error {float(worst.max_abs_err):.3g}, "
        f"max rel error {float(worst.max_rel_err):.3g}"
    )
    if result.tolerance:
        text += " (tolerance " + ", ".join(f"{k}={v}" for k, v in result.tolerance.items()) + ")"
    message = worst.message.strip()
    return f"{text}\n{message}" if message else text


def _flags_excerpt(result: Result) -> str:
    flags = [f for f in result.flags if f.severity == "reject"]
    return "\n".join(f"rejected ({f.code}): {f.reason}" for f in flags)


def error_excerpt(
    status: str,
    result: Result | None = None,
    parse_error: str = "",
    max_chars: int = ERROR_MAX_CHARS,
) -> str:
    """Why a candidate failed, in a few lines. Empty for a successful candidate."""
    if parse_error:
        return clip_text(parse_error, max_chars)
    if status == "ok":
        return ""
    if result is None:
        return status
    parts = [result.message.strip()]
    if status == "compile_error" and result.compile_log:
        parts.append(compile_log_excerpt(result.compile_log, max_chars))
    elif status == "incorrect":
        parts.append(_trial_excerpt(result))
    elif status == "rejected":
        parts.append(_flags_excerpt(result))
    text = "\n".join(p for p in parts if p)
    return clip_text(text, max_chars) if text else status
