"""The sortable table of variants: one row per candidate record."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.text import Text
from textual.widgets import DataTable

from cudal1_tui.store.records import CandidateRecord
from cudal1_tui.ui.display import DEFAULT, DisplayOptions, display_of
from cudal1_tui.ui.format import STATUS_STYLE, flags_text, max_error, record_flags, source_text
from cudal1_tui.ui.messages import VariantChosen

# (key, label, width): fixed widths so long built-in names or flags never push columns away.
COLUMNS: tuple[tuple[str, str, int], ...] = (
    ("round", "rnd", 4),
    ("source", "source", 25),
    ("status", "status", 13),
    ("speedup", "speedup", 8),
    ("error", "max err", 7),
    ("flags", "flags", 10),
    ("decision", "decision", 8),
)

DECISION_STYLE = {"accepted": "bold green", "rejected": "red", "undone": "yellow", "pending": "dim"}


# A key of None (no speedup, no error measured) sorts last in either direction.
SORT_KEYS: dict[str, Callable[[CandidateRecord], Any]] = {
    "round": lambda r: (r.round, r.slot),
    "source": lambda r: r.source,
    "status": lambda r: r.status,
    "speedup": lambda r: r.speedup,
    "error": lambda r: max_error(r.result),
    "flags": lambda r: len(record_flags(r)),
    "decision": lambda r: r.decision,
}


def row_cells(record: CandidateRecord, shown: DisplayOptions = DEFAULT) -> list[Text]:
    fast = "bold green" if (record.speedup or 0) > 1.01 else ""
    return [
        Text(f"{record.round}.{record.slot}", justify="right"),
        Text(source_text(record.source)),
        Text(record.status, style=STATUS_STYLE.get(record.status, "")),
        Text(shown.speedup(record.speedup), justify="right", style=shown.measured_style(fast)),
        Text(shown.error(max_error(record.result)), justify="right"),
        Text(flags_text(shown.flags(record_flags(record))), style="bold red"),
        Text(record.decision, style=DECISION_STYLE.get(record.decision, "")),
    ]


class VariantTable(DataTable[Text]):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self._records: dict[str, CandidateRecord] = {}
        self._sort: tuple[str, bool] = ("round", False)

    def on_mount(self) -> None:
        for key, label, width in COLUMNS:
            self.add_column(label, key=key, width=width)

    @property
    def records(self) -> dict[str, CandidateRecord]:
        return self._records

    def selected_id(self) -> str | None:
        if not self.row_count:
            return None
        return str(self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value)

    def show_records(self, records: list[CandidateRecord], *, select: str | None = None) -> None:
        keep = select or self.selected_id()
        self._records = {r.record_id: r for r in records}
        self._redraw(keep)

    def sort_by(self, column: str) -> None:
        name, reverse = self._sort
        self._sort = (column, not reverse if column == name else column == "speedup")
        self._redraw(self.selected_id())

    def _redraw(self, keep: str | None) -> None:
        name, reverse = self._sort
        key = SORT_KEYS[name]
        known = [r for r in self._records.values() if key(r) is not None]
        unknown = [r for r in self._records.values() if key(r) is None]
        ordered = sorted(known, key=key, reverse=reverse) + unknown
        self.clear()
        shown = display_of(self)
        for record in ordered:
            self.add_row(*row_cells(record, shown), key=record.record_id)
        if keep and keep in self._records:
            self.move_cursor(row=self.get_row_index(keep))

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        self.sort_by(str(event.column_key.value))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        if event.row_key.value is not None:
            self.post_message(VariantChosen(str(event.row_key.value)))
