"""``@last`` and friends: session references the CLI resolves before the store sees them.

``@last`` is the newest session; with a problem file (``cudal1-tui FILE --resume``) the
newest session of that problem. Anything else passes through unchanged (an id, a prefix
or a path, resolved by the store).
"""

from __future__ import annotations

from pathlib import Path

from cudal1_tui.errors import SessionError

LAST = "@last"


def resolve_ref(ref: str, root: Path, problem: str | None = None) -> str:
    if ref != LAST:
        return ref
    from cudal1_tui.store.listing import list_sessions

    sessions = [s for s in list_sessions(root) if problem is None or s.problem == problem]
    if not sessions:
        what = f" of {problem}" if problem else ""
        raise SessionError(f"no session{what} under {root} to resume",
                           fix="start one with `cudal1-tui FILE`, or pass --sessions-dir")
    return sessions[0].folder
