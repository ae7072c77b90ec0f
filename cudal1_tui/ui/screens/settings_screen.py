"""``s``: the generation settings the engine can change between rounds."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Grid, Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

from cudal1_tui.config import Settings
from cudal1_tui.config.load_config import parse_setting
from cudal1_tui.config.saving import Scalar


@dataclass(frozen=True)
class Field:
    name: str
    label: str
    low: float = 0.0
    high: float = 0.0


FIELDS: tuple[Field, ...] = (
    Field("base_url", "model server (base_url)"),
    Field("model", "model (empty: the server's first)"),
    Field("temperature", "temperature (0–2)", 0.0, 2.0),
    Field("candidates_per_round", "candidates per round (1–16)", 1, 16),
    Field("exemplars", "exemplars shown (0–8)", 0, 8),
)


def parse_settings(values: dict[str, str]) -> tuple[dict[str, Scalar], str]:
    """Typed values from the form (through the config loader's parser and validator), or an
    error naming the bad field; the form's ranges come on top."""
    out: dict[str, Scalar] = {}
    for field in FIELDS:
        raw = values.get(field.name, "").strip()
        try:
            value = parse_setting(field.name, raw)
        except ValueError as exc:
            return {}, f"{field.label}: {exc}"
        if isinstance(value, int | float) and not field.low <= value <= field.high:
            return {}, f"{field.label}: {value} is out of range"
        if field.name == "base_url" and not str(value).startswith(("http://", "https://")):
            return {}, f"{field.label}: an http(s) address, e.g. http://localhost:8000/v1"
        out[field.name] = value
    return out, ""


class SettingsScreen(ModalScreen[dict[str, Scalar] | None]):
    CSS_PATH = "../styles/settings.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "cancel", show=False)]

    def __init__(self, settings: Settings, config_path: Path | None = None) -> None:
        super().__init__()
        self._current: dict[str, Scalar] = {f.name: getattr(settings, f.name) for f in FIELDS}
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
