"""``N``: how many rounds to run."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

MAX_ROUNDS = 100


def parse_rounds(text: str) -> int | None:
    try:
        value = int(text.strip())
    except ValueError:
        return None
    return value if 1 <= value <= MAX_ROUNDS else None


class RoundsScreen(ModalScreen[int | None]):
    CSS_PATH = "../styles/rounds.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "cancel", show=False)]

    def __init__(self, default: int = 3) -> None:
        super().__init__()
        self._default = default

    def compose(self) -> ComposeResult:
        with Vertical(id="rounds-box"):
            yield Static("[b]Run several rounds[/b]")
            yield Static(f"how many rounds (1–{MAX_ROUNDS})? escape cancels the run.")
            yield Input(str(self._default), id="rounds-input", type="integer")
            yield Static("", id="rounds-error")
            with Horizontal(id="rounds-buttons"):
                yield Button("Run", id="rounds-run", variant="primary")
                yield Button("Cancel", id="rounds-cancel")

    def _submit(self) -> None:
        value = parse_rounds(self.query_one("#rounds-input", Input).value)
        if value is None:
            self.query_one("#rounds-error", Static).update(
                f"[red]enter a whole number from 1 to {MAX_ROUNDS}[/red]"
            )
            return
        self.dismiss(value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._submit()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "rounds-run":
            self._submit()
        else:
            self.dismiss(None)

    def action_cancel(self) -> None:
        self.dismiss(None)
