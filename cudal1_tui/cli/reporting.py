"""How a command reports an error it cannot go on from: the message, then the fix."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from cudal1_tui.errors import Cudal1Error, compiler_style


def report(exc: Cudal1Error) -> None:
    """``error: MESSAGE`` and ``fix: COMMAND`` on stderr, as written: a fix such as
    ``pip install 'cudal1-tui[export]'`` is no Rich markup. A compiler-style message
    (``file:3: error: …``) already says it is an error."""
    err = Console(stderr=True, soft_wrap=True, highlight=False)
    head = "" if compiler_style(exc.message) else "[bold red]error:[/] "
    err.print(head + escape(exc.message))
    if exc.fix:
        err.print(f"[bold]fix:[/] {escape(exc.fix)}")
