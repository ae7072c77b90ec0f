"""Best speedup across rounds, as a sparkline."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Label, Sparkline

from cudal1_tui.ui.display import display_of


class SpeedupChart(Vertical):
    def compose(self) -> ComposeResult:
        yield Label("best speedup by round: —", id="chart-title")
        yield Sparkline([], id="chart-line")

    def show(self, best_by_round: list[float]) -> None:
        shown = display_of(self)
        title = "best speedup by round: " + (
            " ".join(shown.speedup(v) for v in best_by_round[-8:]) if best_by_round else "—"
        )
        self.query_one("#chart-title", Label).update(title)
        # Start from the reference (1×) so one round already draws a rise, not a flat block.
        self.query_one(Sparkline).data = shown.chart([1.0, *best_by_round]) if best_by_round else []
