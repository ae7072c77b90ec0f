"""The detail tabs for one variant: Diff, Code, Analysis, Model output, Logs."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import (
    Label,
    Markdown,
    RichLog,
    Static,
    TabbedContent,
    TabPane,
    TextArea,
)

from cudal1_tui.present.verdict_text import record_details
from cudal1_tui.records import CandidateRecord
from cudal1_tui.ui.code_highlight import cuda_highlight_query, cuda_language, cuda_sources
from cudal1_tui.ui.diffing import Layout, render_diff, stats
from cudal1_tui.ui.format import STATUS_STYLE, record_status
from cudal1_tui.ui.widgets.output import ModelOutput
from cudal1_tui.uncertainty import interval_text, noise_warning, precision_text

COMPILE_TAIL = 30
SPLIT_MIN_WIDTH = 120  # below this a side-by-side diff cuts both sides: show it unified
TABS = ("tab-diff", "tab-code", "tab-analysis", "tab-output", "tab-logs")
NO_CUDA = "// this variant embeds no CUDA/C++ source (a PyTorch-level change)"


def findings_text(record: CandidateRecord) -> Text:
    """The selected variant's verdict, integrity findings and compiler output."""
    result = record.result
    status = record_status(record)
    text = Text.assemble((f"{record.round}.{record.slot} {record.source}: ", "bold"),
                         (status, STATUS_STYLE.get(status, "")))
    if record.speedup is not None:
        interval = interval_text(result)
        text.append(f"\nspeedup {precision_text(result, record.speedup)}"
                    + (f", p10–p90 range {interval}" if interval else ""))
    warning = noise_warning(result)
    if warning:
        text.append(f"\n{warning}", style="yellow")
    details = record_details(record, COMPILE_TAIL)
    if details:
        text.append("\n")
        text.append_text(details)
    return text


def analysis_markdown(record: CandidateRecord) -> str:
    sections = record.sections
    parts = [f"# Round {record.round}, slot {record.slot} — {record.source}"]
    if record.parse_error:
        parts.append(f"> parse error: {record.parse_error}")
    parts.append("## Performance Analysis\n\n" + (sections.performance_analysis or "_none given_"))
    parts.append("## Algorithm Design\n\n" + (sections.algorithm_design or "_none given_"))
    return "\n\n".join(parts)


class DetailPane(Vertical):
    def compose(self) -> ComposeResult:
        with TabbedContent(id="tabs"):
            with TabPane("Diff", id="tab-diff"):
                yield Label("select a variant", id="diff-title")
                with VerticalScroll(id="diff-scroll"):
                    yield Static(id="diff-body")
            with TabPane("Code", id="tab-code"):
                yield TextArea.code_editor("", language="python", read_only=True, id="code-python")
                yield Label("CUDA sources", id="cuda-title")
                yield TextArea.code_editor("", read_only=True, id="code-cuda")
            with TabPane("Analysis", id="tab-analysis"), VerticalScroll():
                yield Markdown("_no variant selected_", id="analysis")
            with TabPane("Model output", id="tab-output"):
                yield ModelOutput(id="output")
            with TabPane("Logs", id="tab-logs"):
                yield Static(id="logs-head")
                yield RichLog(id="logs", wrap=True, markup=False, highlight=False)

    def on_mount(self) -> None:
        cuda = self.query_one("#code-cuda", TextArea)
        cuda.register_language("cuda", cuda_language(), cuda_highlight_query())
        cuda.language = "cuda"

    @property
    def active(self) -> str:
        return self.query_one(TabbedContent).active

    @active.setter
    def active(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab

    def cycle_tab(self, step: int) -> None:
        self.active = TABS[(TABS.index(self.active) + step) % len(TABS)]

    def show_diff(self, base_label: str, base: str, code: str, layout: Layout) -> None:
        added, removed = stats(base, code)
        shown = layout
        if layout == "split" and self.size.width < SPLIT_MIN_WIDTH:
            shown = "unified"
        note = "unified (split needs a wider pane)" if shown != layout else layout
        self.query_one("#diff-title", Label).update(
            f"against [b]{base_label}[/b] · {note} · +{added} −{removed}  (b: base, v: layout)"
        )
        layout = shown
        self.query_one("#diff-body", Static).update(render_diff(base, code, layout))

    def show_record(self, record: CandidateRecord) -> None:
        self.query_one("#code-python", TextArea).load_text(record.code)
        sources = cuda_sources(record.code)
        self.query_one("#code-cuda", TextArea).load_text(
            "\n\n// ────────\n\n".join(sources) if sources else NO_CUDA
        )
        self.query_one("#analysis", Markdown).update(analysis_markdown(record))
        self.query_one("#logs-head", Static).update(findings_text(record))

