"""A yes/no question, e.g. accepting a variant that carries integrity flags."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static


class ConfirmScreen(ModalScreen[bool]):
    CSS_PATH = "../styles/confirm.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "answer(False)", "cancel", show=False),
        Binding("y", "answer(True)", "yes", show=False),
    ]

    AUTO_FOCUS = "#confirm-no"  # the safe answer, from the first frame on

    def __init__(self, title: str, body: str, yes: str = "Accept anyway") -> None:
        super().__init__()
        self._title, self._body, self._yes = title, body, yes

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-box"):
            yield Static(f"[b]{self._title}[/b]", id="confirm-title")
            yield Static(self._body, id="confirm-body")
            with Horizontal(id="confirm-buttons"):
                yield Button(self._yes, id="confirm-yes", variant="error")
                yield Button("Cancel", id="confirm-no", variant="primary")

    def on_mount(self) -> None:
        # the safe answer has the focus: a stray enter never quits or accepts
        self.query_one("#confirm-no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "confirm-yes")

    def action_answer(self, value: bool) -> None:
        self.dismiss(value)
