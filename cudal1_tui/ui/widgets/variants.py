"""The sortable table of variants: one row per candidate record.

Columns have a priority: when the table is narrow the least important go first
(max error, then the interval, then flags…), so speedup, status and decision stay.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual import events
from textual.widgets import DataTable

from cudal1_tui.measurements import noise_of
from cudal1_tui.records import CandidateRecord
from cudal1_tui.ui.display import DEFAULT, DisplayOptions, display_of
from cudal1_tui.ui.format import (
    STATUS_STYLE,
    flags_text,
    max_error,
    record_flags,
    record_status,
    source_text,
)
from cudal1_tui.ui.messages import VariantChosen
from cudal1_tui.uncertainty import interval_text, noisy


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    width: int
    keep: int  # higher stays longer when the table narrows


# Fixed widths so long built-in names or flags never push columns away.
COLUMNS: tuple[Column, ...] = (
    Column("round", "rnd", 4, 9),
    Column("source", "source", 25, 4),
    Column("status", "status", 13, 7),
    Column("speedup", "speedup", 8, 8),
    Column("range", "p10–p90", 11, 2),
    Column("error", "max err", 8, 1),  # widths leave room for the sort arrow
    Column("flags", "flags", 10, 5),
    Column("decision", "decision", 9, 6),
)
CELL_PADDING = 2  # DataTable pads each cell by one column on either side
MIN_SOURCE = 12  # the source column shrinks to this before whole columns drop

DECISION_STYLE = {"accepted": "bold green", "rejected": "red", "undone": "yellow", "pending": "dim"}
WIN = 1.01  # the reward's threshold: at or below it a variant is no faster

# A key of None (no speedup, no error measured) sorts last in either direction.
SORT_KEYS: dict[str, Callable[[CandidateRecord], Any]] = {
    "round": lambda r: (r.round, r.slot),
    "source": lambda r: r.source,
    "status": lambda r: r.status,
    "speedup": lambda r: r.speedup,
    "range": lambda r: r.speedup,
    "error": lambda r: max_error(r.result),
    "flags": lambda r: len(record_flags(r)),
    "decision": lambda r: r.decision,
}


def speedup_style(record: CandidateRecord) -> str:
    """Green above the win threshold, red below 1×, yellow in between or when noisy."""
    speedup = record.speedup
    if speedup is None:
        return ""
    if round(speedup, 2) < 1.0:
        return "bold red"
    if speed_doubt(record) or noisy(record.result):
        return "yellow"
    return "bold green"


def speed_doubt(record: CandidateRecord) -> str:
    """Why ``record``'s speedup is no real win, judged as the table shows it (``1.00×`` is
    no win, whatever digits follow) and against the timing noise; "" for a real win."""
    speedup = record.speedup
    if speedup is None:
        return "its speedup was not measured"
    shown, noise = round(speedup, 2), noise_of(record.result)
    if shown <= 1.0:
        return f"it is not faster than the reference ({shown:.2f}×)"
    if shown <= WIN:
        return f"{shown:.2f}× is not above the win threshold ({WIN:.2f}×)"
    if "speedup_within_noise" in record.flag_codes(include_info=True) or (
            abs(speedup - 1.0) <= noise):
        return f"{shown:.2f}× is inside the timing noise (±{noise:.1%}): it may be no faster"
    return ""


def accept_doubts(record: CandidateRecord) -> list[str]:
    """Why accepting ``record`` needs a confirmation; empty when it does not."""
    doubt = speed_doubt(record)
    doubts = [doubt] if doubt else []
    flags = record_flags(record)
    if flags:
        doubts.append(f"it carries integrity findings ({flags_text(flags)}); its speedup may "
                      "not be real")
    return doubts


def best_record(records: list[CandidateRecord]) -> CandidateRecord | None:
    """The fastest verified, unflagged variant; None when there is none."""
    clean = [r for r in records if r.status == "ok" and r.speedup is not None
             and not record_flags(r)]
    return max(clean, key=lambda r: r.speedup or 0.0, default=None)


def _needed(columns: list[Column], shrink_source: bool) -> int:
    total = sum(c.width + CELL_PADDING for c in columns)
    source = next((c for c in columns if c.key == "source"), None)
    return total - (source.width - MIN_SOURCE if source is not None and shrink_source else 0)


def visible_columns(width: int) -> list[Column]:
    """The columns that fit in ``width`` cells, dropping the least important first; the
    source column narrows (to ``MIN_SOURCE``) only once every column less important than
    it has gone, so a built-in's name is not cut while the range still shows."""
    shown = list(COLUMNS)
    source_keep = next(c.keep for c in COLUMNS if c.key == "source")
    while len(shown) > 1:
        weakest = min(shown, key=lambda c: c.keep)
        if _needed(shown, shrink_source=False) <= width:
            break
        if weakest.keep >= source_keep and _needed(shown, shrink_source=True) <= width:
            break
        shown.remove(weakest)
    return shown


def row_cells(record: CandidateRecord, keys: list[str],
              shown: DisplayOptions = DEFAULT) -> list[Text]:
    cells = {
        "round": lambda: Text(f"{record.round}.{record.slot}", justify="right"),
        "source": lambda: Text(source_text(record.source)),
        "status": lambda: Text(record_status(record),
                               style=STATUS_STYLE.get(record_status(record), "")),
        "speedup": lambda: Text(shown.speedup(record.speedup, record.result.speedup_bound),
                                justify="right",
                                style=shown.measured_style(speedup_style(record))),
        "range": lambda: Text("•" if shown.mask_measurements and interval_text(record.result)
                              else interval_text(record.result), style="dim"),
        "error": lambda: Text(shown.error(max_error(record.result)), justify="right"),
        "flags": lambda: Text(flags_text(shown.flags(record_flags(record))), style="bold red"),
        "decision": lambda: Text(record.decision, style=DECISION_STYLE.get(record.decision, "")),
    }
    return [cells[key]() for key in keys]


class VariantTable(DataTable[Text]):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self._records: dict[str, CandidateRecord] = {}
        self._sort: tuple[str, bool] = ("round", False)
        self._columns: list[Column] = []
        self._shown_source = 0

    def on_mount(self) -> None:
        self._set_columns(visible_columns(self.size.width or 200))

    def on_resize(self, event: events.Resize) -> None:
        wanted = visible_columns(event.size.width)
        # the source's width follows the table's too (it is not known at mount)
        if wanted != self._columns or self._source_width(wanted) != self._shown_source:
            self._set_columns(wanted)

    def _source_width(self, columns: list[Column]) -> int:
        spare = self.size.width - sum(c.width + CELL_PADDING for c in columns)
        full = next((c.width for c in columns if c.key == "source"), 0)
        return max(MIN_SOURCE, full + spare) if spare < 0 else full

    def _label(self, column: Column) -> str:
        """The column's name, with ▲ (ascending) or ▼ on the one the table is sorted by."""
        name, reverse = self._sort
        return column.label + (("▼" if reverse else "▲") if column.key == name else "")

    def _set_columns(self, columns: list[Column]) -> None:
        keep = self.selected_id() if self._columns else None
        self.clear(columns=True)
        self._columns = columns
        self._shown_source = self._source_width(columns)
        for column in columns:
            width = self._shown_source if column.key == "source" else column.width
            self.add_column(self._label(column), key=column.key, width=width)
        self._redraw(keep)

    @property
    def column_keys(self) -> list[str]:
        return [c.key for c in self._columns]

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

    def select_best(self) -> bool:
        best = best_record(list(self._records.values()))
        if best is None:
            return False
        self.move_cursor(row=self.get_row_index(best.record_id))
        return True

    def sort_by(self, column: str) -> None:
        name, reverse = self._sort
        self._sort = (column, not reverse if column == name else column == "speedup")
        self._set_columns(self._columns)  # the arrow moves to the sorted column

    def _redraw(self, keep: str | None) -> None:
        if not self._columns:
            return
        name, reverse = self._sort
        key = SORT_KEYS[name]
        known = [r for r in self._records.values() if key(r) is not None]
        unknown = [r for r in self._records.values() if key(r) is None]
        ordered = sorted(known, key=key, reverse=reverse) + unknown
        self.clear()
        shown = display_of(self)
        for record in ordered:
            self.add_row(*row_cells(record, self.column_keys, shown), key=record.record_id)
        if keep and keep in self._records:
            self.move_cursor(row=self.get_row_index(keep))

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        self.sort_by(str(event.column_key.value))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        if event.row_key.value is not None:
            self.post_message(VariantChosen(str(event.row_key.value)))
