"""A banner: what failed (or, at info level, what runs instead), how to fix it, Retry."""

from __future__ import annotations

from typing import Literal

from rich.markup import escape
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Static

from cudal1_tui.ui.messages import RetryRequested


class ErrorBanner(Horizontal):
    def compose(self) -> ComposeResult:
        with Vertical(id="banner-text"):
            yield Static(id="banner-message")
            yield Static(id="banner-fix")
        yield Button("Retry", id="banner-retry", variant="warning")
        yield Button("Dismiss", id="banner-dismiss")

    def show(self, message: str, fix: str = "", *, retry: bool = True,
             severity: Literal["error", "info"] = "error") -> None:
        self.set_class(severity == "info", "-info")
        # the text as written: `pip install 'cudal1-tui[export]'` is no markup
        self.query_one("#banner-message", Static).update(f"[b]{severity}[/b] {escape(message)}")
        self.query_one("#banner-fix", Static).update(f"[b]fix[/b] {escape(fix)}" if fix else "")
        self.query_one("#banner-retry", Button).display = retry
        self.display = True

    def hide(self) -> None:
        self.display = False

    @on(Button.Pressed, "#banner-retry")
    def _retry(self, event: Button.Pressed) -> None:
        event.stop()
        self.hide()
        self.post_message(RetryRequested())

    @on(Button.Pressed, "#banner-dismiss")
    def _dismiss(self, event: Button.Pressed) -> None:
        event.stop()
        self.hide()
