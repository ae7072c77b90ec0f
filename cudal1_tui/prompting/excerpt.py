"""Short, readable error excerpts of a failed candidate, for the prompt and the UI."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

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


def _trial_excerpt(result: Mapping[str, Any]) -> str:
    failed = [t for t in result.get("trials", []) if not t.get("ok", True)]
    if not failed:
        return ""
    worst = max(failed, key=lambda t: float(t.get("max_abs_err", 0.0)))
    text = (
        f"{len(failed)} of {len(result.get('trials', []))} correctness trials failed; "
        f"max abs error {float(worst.get('max_abs_err', 0.0)):.3g}, "
        f"max rel error {float(worst.get('max_rel_err', 0.0)):.3g}"
    )
    tolerance = result.get("tolerance") or {}
    if tolerance:
        text += " (tolerance " + ", ".join(f"{k}={v}" for k, v in tolerance.items()) + ")"
    message = str(worst.get("message", "")).strip()
    return f"{text}\n{message}" if message else text


def _flags_excerpt(result: Mapping[str, Any]) -> str:
    flags = [f for f in result.get("flags", []) if f.get("severity", "reject") == "reject"]
    return "\n".join(f"rejected ({f.get('code', '?')}): {f.get('reason', '')}" for f in flags)


def error_excerpt(
    status: str,
    result: Mapping[str, Any] | None = None,
    parse_error: str = "",
    max_chars: int = ERROR_MAX_CHARS,
) -> str:
    """Why a candidate failed, in a few lines. Empty for a successful candidate."""
    if parse_error:
        return clip_text(parse_error, max_chars)
    if status == "ok":
        return ""
    result = result or {}
    parts = [str(result.get("message", "")).strip()]
    if status == "compile_error" and result.get("compile_log"):
        parts.append(compile_log_excerpt(str(result["compile_log"]), max_chars))
    elif status == "incorrect":
        parts.append(_trial_excerpt(result))
    elif status == "rejected":
        parts.append(_flags_excerpt(result))
    text = "\n".join(p for p in parts if p)
    return clip_text(text, max_chars) if text else status
