"""``o``: open a past session from the sessions directory."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, DataTable, Static

from cudal1_tui.store.listing import SessionSummary
from cudal1_tui.ui.format import speedup_text


class SessionsScreen(ModalScreen[SessionSummary | None]):
    CSS_PATH = "../styles/sessions.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "cancel", show=False)]

    def __init__(self, sessions: list[SessionSummary], current: str = "") -> None:
        super().__init__()
        self._sessions = {s.session_id: s for s in sessions}
        self._current = current

    def compose(self) -> ComposeResult:
        with Vertical(id="sessions-box"):
            yield Static("[b]Open a past session[/b] (enter or click a row)")
            table: DataTable[str] = DataTable(id="sessions-table", cursor_type="row")
            table.add_columns("session", "problem", "created", "candidates", "best", "accepted")
            for s in self._sessions.values():
                marker = " (open)" if s.session_id == self._current else ""
                table.add_row(s.session_id + marker, s.problem, s.created_at[:19],
                              str(s.candidates), speedup_text(s.best_speedup),
                              speedup_text(s.accepted_speedup), key=s.session_id)
            yield table
            if not self._sessions:
                yield Static("no sessions yet", id="sessions-empty")
            with Horizontal(id="sessions-buttons"):
                yield Button("Open", id="sessions-open", variant="primary")
                yield Button("Cancel", id="sessions-cancel")

    def _chosen(self) -> SessionSummary | None:
        table = self.query_one(DataTable)
        if not table.row_count:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return self._sessions.get(str(key))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.dismiss(self._sessions.get(str(event.row_key.value)))

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(self._chosen() if event.button.id == "sessions-open" else None)

    def action_cancel(self) -> None:
        self.dismiss(None)
