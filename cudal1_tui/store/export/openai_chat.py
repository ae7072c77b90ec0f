"""``openai-chat``: SFT JSONL ``{"messages": [system, user, assistant]}`` of good candidates.

Good: status ok and speedup >= ``--min-speedup`` (default 1.01). The assistant turn is
the model's raw response (reasoning only with ``--with-reasoning``).
"""

from __future__ import annotations

from pathlib import Path

from cudal1_tui.store.export.common import (
    GOOD_SPEEDUP,
    ExportOptions,
    SessionData,
    assistant,
    has_completion,
    prompt_of,
    selected,
    write_jsonl,
)

EXTENSION = "jsonl"


def write(sessions: list[SessionData], options: ExportOptions, path: Path) -> int:
    rows = [
        {"messages": [*prompt_of(r), assistant(r, options.with_reasoning)]}
        for data in sessions
        for r in selected(data, options, default_min=GOOD_SPEEDUP)
        if has_completion(r)
    ]
    write_jsonl(path, rows)
    return len(rows)
