"""``?``: every action and the key it is bound to."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, DataTable, Static

INTRO = (
    "Each round asks the model (and the built-in proposer) for faster variants, then "
    "compiles, verifies and times them in a separate process. Pick a row to see its diff, "
    "code, analysis and logs; accept the one you want (a git commit in the session). "
    "A ⚙ marks the built-in proposer's candidates (torch.compile modes, CUDA graphs, "
    "channels_last, known rewrites). A ≥ before a speedup: the candidate's calls are so short "
    "that the fixed cost of handing each one over stays in its time, so the true speedup is "
    "at least that."
)


class HelpScreen(ModalScreen[None]):
    CSS_PATH = "../styles/help.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark", "dismiss_help", "close", show=False),
    ]

    def __init__(self, rows: list[tuple[str, str]]) -> None:
        super().__init__()
        self._rows = rows

    def compose(self) -> ComposeResult:
        with Vertical(id="help-box"):
            yield Static("[b]cudal1-tui — keys[/b]", id="help-title")
            yield Static(INTRO, id="help-intro")
            table: DataTable[str] = DataTable(id="help-keys", cursor_type="none")
            table.add_columns("key", "action")
            for key, description in self._rows:
                table.add_row(key, description)
            yield table
            yield Button("Close", id="help-close", variant="primary")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(None)

    def action_dismiss_help(self) -> None:
        self.dismiss(None)
