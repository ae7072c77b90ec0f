"""``e``: export the session — a format and a destination."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Input, RadioButton, RadioSet, Static

FORMATS: tuple[tuple[str, str], ...] = (
    ("openai-chat", "OpenAI fine-tuning chat (SFT)"),
    ("trl", "TRL prompt/completion"),
    ("trl-preference", "TRL preference pairs"),
    ("verl", "verl parquet (RL)"),
    ("jsonl", "raw trace records"),
    ("module", "accepted kernel as a Python module"),
)
SUFFIX = {"verl": ".parquet", "module": ".py"}


@dataclass(frozen=True)
class ExportRequest:
    format: str
    destination: str
    only_accepted: bool = False


def default_destination(session_id: str, fmt: str, problem: str = "") -> str:
    """A file name per format; the module's must import as written: ``optimized_relu.py``."""
    if fmt == "module":
        from cudal1_tui.store.naming import slug

        return f"optimized_{slug(problem or 'model')}.py"
    return f"{session_id or 'session'}-{fmt}{SUFFIX.get(fmt, '.jsonl')}"


class ExportScreen(ModalScreen[ExportRequest | None]):
    CSS_PATH = "../styles/export.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "cancel", show=False)]

    def __init__(self, session_id: str, problem: str = "") -> None:
        super().__init__()
        self._session_id = session_id
        self._problem = problem
        self._format = FORMATS[0][0]

    def _default(self) -> str:
        return default_destination(self._session_id, self._format, self._problem)

    def compose(self) -> ComposeResult:
        with Vertical(id="export-box"):
            yield Static("[b]Export this session[/b]")
            with RadioSet(id="export-format"):
                for index, (name, label) in enumerate(FORMATS):
                    yield RadioButton(f"{name} — {label}", value=index == 0, name=name)
            yield Static("destination")
            yield Input(self._default(), id="export-dest")
            yield Checkbox("accepted candidates only", id="export-accepted")
            yield Static("", id="export-error")
            with Horizontal(id="export-buttons"):
                yield Button("Export", id="export-go", variant="primary")
                yield Button("Cancel", id="export-cancel")

    def on_radio_set_changed(self, event: RadioSet.Changed) -> None:
        event.stop()
        dest = self.query_one("#export-dest", Input)
        was_default = dest.value == self._default()
        self._format = event.pressed.name or FORMATS[0][0]
        if was_default:
            dest.value = self._default()

    def _submit(self) -> None:
        dest = self.query_one("#export-dest", Input).value.strip()
        if not dest:
            self.query_one("#export-error", Static).update("[red]enter a destination path[/red]")
            return
        accepted = self.query_one("#export-accepted", Checkbox).value
        self.dismiss(ExportRequest(self._format, dest, accepted))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._submit()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "export-go":
            self._submit()
        else:
            self.dismiss(None)

    def action_cancel(self) -> None:
        self.dismiss(None)
