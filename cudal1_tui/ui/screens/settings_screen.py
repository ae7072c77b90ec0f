"""``s``: the generation settings the engine can change between rounds."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Grid, Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static


@dataclass(frozen=True)
class Field:
    name: str
    label: str
    kind: type
    low: float = 0.0
    high: float = 0.0


FIELDS: tuple[Field, ...] = (
    Field("model", "model (empty: the server's first)", str),
    Field("temperature", "temperature (0–2)", float, 0.0, 2.0),
    Field("candidates_per_round", "candidates per round (1–16)", int, 1, 16),
    Field("exemplars", "exemplars shown (0–8)", int, 0, 8),
)


def parse_settings(values: dict[str, str]) -> tuple[dict[str, Any], str]:
    """Typed values from the form, or an error naming the bad field."""
    out: dict[str, Any] = {}
    for field in FIELDS:
        raw = values.get(field.name, "").strip()
        if field.kind is str:
            out[field.name] = raw
            continue
        try:
            number = field.kind(raw)
        except ValueError:
            return {}, f"{field.label}: {raw!r} is not a number"
        if not field.low <= number <= field.high:
            return {}, f"{field.label}: {number} is out of range"
        out[field.name] = number
    return out, ""


class SettingsScreen(ModalScreen[dict[str, Any] | None]):
    CSS_PATH = "../styles/settings.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "cancel", show=False)]

    def __init__(self, current: dict[str, Any], config_path: Path | None = None) -> None:
        super().__init__()
        self._current = current
        self._saved_to = (f"saved to {config_path}" if config_path is not None
                          else "this session only: not written to a config file")

    def compose(self) -> ComposeResult:
        with Vertical(id="settings-box"):
            yield Static("[b]Generation settings[/b] (apply from the next round)")
            yield Static(self._saved_to, id="settings-where", markup=False)
            with Grid(id="settings-grid"):
                for field in FIELDS:
                    yield Label(field.label)
                    yield Input(str(self._current.get(field.name, "")), id=f"set-{field.name}")
            yield Static("", id="settings-error")
            with Horizontal(id="settings-buttons"):
                yield Button("Save", id="settings-save", variant="primary")
                yield Button("Cancel", id="settings-cancel")

    def _submit(self) -> None:
        values = {f.name: self.query_one(f"#set-{f.name}", Input).value for f in FIELDS}
        parsed, error = parse_settings(values)
        if error:
            self.query_one("#settings-error", Static).update(f"[red]{error}[/red]")
            return
        changed = {k: v for k, v in parsed.items() if v != self._current.get(k)}
        self.dismiss(changed)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._submit()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "settings-save":
            self._submit()
        else:
            self.dismiss(None)

    def action_cancel(self) -> None:
        self.dismiss(None)
