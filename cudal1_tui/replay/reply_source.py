"""Where the replay server's replies come from: a trace, a session dir or a script.

Accepted sources (see ``docs/replay.md``):

- ``trace.jsonl``: rows of ``CandidateRecord``; only ``source == "model"`` rows with a
  ``raw_response`` are served (``raw_response`` as content, ``reasoning`` as reasoning), in
  order; the key of each reply is the record's ``problem_name``.
- a session directory: its ``trace.jsonl``.
- a JSON script: ``{"model": "...", "replies": [{"content": "...", "reasoning": "...",
  "finish_reason": "stop", "key": "diag_matmul"}, ...]}`` or a bare list of such objects.
- a JSONL script: one reply object per line (trace rows may be mixed in).
- a directory of ``*.md`` replies (sorted by name); files in a subdirectory ``KEY/`` carry that
  key. A leading ``<think>…</think>`` block in a file is served as the reasoning.
- a single ``*.md`` file: one reply.

A request is matched to a key when the key appears in the text of its messages (the longest
such key wins); it is then served from that key's replies, cycling. Otherwise it is served from
all replies, cycling in order.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from cudal1_tui.errors import Cudal1Error

FINISH_REASONS = ("stop", "length")
_THINK = re.compile(r"\A\s*<think>(.*?)</think>\s*", re.DOTALL)


class ReplaySourceError(Cudal1Error):
    """The replay source is missing, empty or malformed."""

    def __init__(self, message: str) -> None:
        super().__init__(message, fix="see docs/replay.md for the accepted formats")


@dataclass(frozen=True)
class Reply:
    """One recorded or scripted model reply."""

    content: str
    reasoning: str = ""
    finish_reason: str = "stop"
    key: str = ""


@dataclass
class ReplyBook:
    """Replies in order, with per-key cycling; thread-safe."""

    replies: list[Reply]
    model: str = ""  # the model named by the source, if any
    _cursors: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        if not self.replies:
            raise ReplaySourceError("the replay source holds no replies")

    @property
    def keys(self) -> list[str]:
        return sorted({r.key for r in self.replies if r.key}, key=len, reverse=True)

    def key_for(self, prompt_text: str) -> str:
        """The longest reply key found in the prompt, or "" for none."""
        return next((k for k in self.keys if k in prompt_text), "")

    def take(self, prompt_text: str) -> Reply:
        """The next reply for this prompt (its key's pool, else all replies), cycling."""
        key = self.key_for(prompt_text)
        pool = [r for r in self.replies if r.key == key] if key else self.replies
        with self._lock:
            cursor = self._cursors.get(key, 0)
            self._cursors[key] = cursor + 1
        return pool[cursor % len(pool)]


def load_replies(path: Path) -> ReplyBook:
    """Load a trace, session dir, JSON/JSONL script or ``*.md`` replies."""
    if not path.exists():
        raise ReplaySourceError(f"{path}: no such file or directory")
    if path.is_dir():
        trace = path / "trace.jsonl"
        return _from_jsonl(trace) if trace.is_file() else _from_markdown_dir(path)
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return _from_jsonl(path)
    if suffix == ".json":
        return _from_json(path)
    if suffix == ".md":
        return ReplyBook([_from_markdown(path.read_text(encoding="utf-8"), "")])
    raise ReplaySourceError(f"{path}: expected trace.jsonl, a session dir, *.json, *.jsonl or *.md")


def _reply_from_obj(obj: object, where: str) -> Reply:
    if not isinstance(obj, dict):
        raise ReplaySourceError(f"{where}: a reply must be an object, got {type(obj).__name__}")
    content = obj.get("content")
    if not isinstance(content, str):
        raise ReplaySourceError(f"{where}: a reply needs a string 'content'")
    reasoning = obj.get("reasoning", "") or ""
    finish = obj.get("finish_reason", "stop") or "stop"
    key = obj.get("key", "") or ""
    if not isinstance(reasoning, str) or not isinstance(key, str):
        raise ReplaySourceError(f"{where}: 'reasoning' and 'key' must be strings")
    if finish not in FINISH_REASONS:
        raise ReplaySourceError(f"{where}: finish_reason must be one of {FINISH_REASONS}")
    return Reply(content=content, reasoning=reasoning, finish_reason=finish, key=key)


def _is_trace_row(obj: Mapping[str, object]) -> bool:
    return obj.get("kind") in {"candidate", "decision"} or "record_id" in obj


def _reply_from_trace_row(obj: Mapping[str, object]) -> Reply | None:
    if obj.get("kind", "candidate") != "candidate" or obj.get("source") != "model":
        return None
    raw = obj.get("raw_response")
    if not isinstance(raw, str) or not raw:
        return None
    reasoning = obj.get("reasoning") or ""
    key = obj.get("problem_name") or ""
    return Reply(content=raw, reasoning=str(reasoning), key=str(key))


def _from_jsonl(path: Path) -> ReplyBook:
    replies: list[Reply] = []
    model = ""
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}: line {number}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ReplaySourceError(f"{where}: not JSON ({exc.msg})") from None
        if isinstance(obj, dict) and _is_trace_row(obj):
            reply = _reply_from_trace_row(obj)
            if reply is not None and not model:
                model = str(obj.get("model") or "")
        else:
            reply = _reply_from_obj(obj, where)
        if reply is not None:
            replies.append(reply)
    if not replies:
        raise ReplaySourceError(f"{path}: no model replies (rows with source 'model' and a "
                                "raw_response, or reply objects)")
    return ReplyBook(replies, model=model)


def _from_json(path: Path) -> ReplyBook:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ReplaySourceError(f"{path}: line {exc.lineno}: not JSON ({exc.msg})") from None
    model = ""
    if isinstance(data, dict):
        model = str(data.get("model") or "")
        data = data.get("replies")
    if not isinstance(data, list) or not data:
        raise ReplaySourceError(f"{path}: expected a non-empty 'replies' list")
    replies = [_reply_from_obj(obj, f"{path}: replies[{i}]") for i, obj in enumerate(data)]
    return ReplyBook(replies, model=model)


def _from_markdown(text: str, key: str) -> Reply:
    match = _THINK.match(text)
    if match:
        return Reply(content=text[match.end():], reasoning=match.group(1).strip(), key=key)
    return Reply(content=text, key=key)


def _from_markdown_dir(path: Path) -> ReplyBook:
    replies = [_from_markdown(f.read_text(encoding="utf-8"), "") for f in sorted(path.glob("*.md"))]
    for sub in sorted(p for p in path.iterdir() if p.is_dir()):
        replies += [_from_markdown(f.read_text(encoding="utf-8"), sub.name)
                    for f in sorted(sub.glob("*.md"))]
    if not replies:
        raise ReplaySourceError(f"{path}: no trace.jsonl and no *.md replies in this directory")
    return ReplyBook(replies)
