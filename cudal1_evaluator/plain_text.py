"""Text a candidate may have written (its stderr, exception messages, compiler output), made
safe to show: a verdict's message reaches terminals (``cudal1-tui eval``), the Textual UI and
traces, and an escape sequence in it could clear a screen, forge a status line or write to the
clipboard (OSC 52; red team round 25). Control characters other than newline and tab are
shown as ``\\xNN`` and very long lines are cut where the verdict is made, and again where
text is displayed (a trace may come from an older evaluator, a build failure from the build
stage)."""

from __future__ import annotations

import re

MAX_LINE = 4000  # characters a line keeps (a minified source or a binary dump runs longer)

_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def shown(text: object) -> str:
    """``text`` with its control characters visible and its lines at most ``MAX_LINE``
    (anything but a string, as a forged report may send, is shown as its ``str``)."""
    text = text if isinstance(text, str) else str(text)
    if not text:
        return text
    escaped = _CONTROLS.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
    return "\n".join(line if len(line) <= MAX_LINE else line[:MAX_LINE] + " [cut]"
                     for line in escaped.split("\n"))
