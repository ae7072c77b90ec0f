"""The top strip: problem, device, reference times, best speedup, session."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from cudal1_tui.ui.baseline import PROBE_LABEL
from cudal1_tui.ui.display import display_of


@dataclass(frozen=True)
class HeaderInfo:
    problem: str = ""
    device: str = ""
    reference_ms: float | None = None
    reference_label: str = PROBE_LABEL  # whose reference: "row 1.2", "probe estimate"
    torch_compile_ms: float | None = None
    best_speedup: float | None = None
    session_id: str = ""
    status: str = "starting…"


class HeaderBar(Static):
    info: reactive[HeaderInfo] = reactive(HeaderInfo, layout=False)

    def render(self) -> Text:
        info = self.info
        shown = display_of(self)
        # which row's reference is shown is fixed; how it was taken depends on the clock
        label = info.reference_label.split(",")[0] if shown.mask_measurements \
            else info.reference_label
        # most important first: a narrow terminal cuts each line's end, never wraps it
        first = Text.assemble(
            ("cudal1-tui ", "bold #61afef"),
            (info.problem or "…", "bold"),
            ("  best ", "dim"),
            (shown.speedup(info.best_speedup), "bold green" if info.best_speedup else ""),
            (f"  reference ({label}): eager ", "dim"),
            shown.ms(info.reference_ms),
            (" · torch.compile ", "dim"),
            shown.ms(info.torch_compile_ms),
            ("  device ", "dim"),
            info.device or "…",
        )
        second = Text(f"session {shown.session(info.session_id) or '—'}", style="dim")
        second.append(f"  {info.status}", style="italic")
        width = max(self.size.width, 1)
        first.truncate(width, overflow="ellipsis")
        second.truncate(width, overflow="ellipsis")
        return Text("\n").join([first, second])
