"""The running stage: generating (tokens, tokens/s), compiling, verifying k/n, timing."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Label, ProgressBar

from cudal1_tui.engine.events import StageChanged, StreamChunk
from cudal1_tui.ui.display import display_of

STAGE_LABELS: dict[str, str] = {
    "probing": "probing the reference",
    "prompting": "building the prompt",
    "generating": "generating",
    "parsing": "parsing the reply",
    "gating": "static gate",
    "compiling": "compiling",
    "verifying": "verifying",
    "timing": "timing",
    "recording": "recording",
    "idle": "idle",
}


class ProgressStrip(Horizontal):
    def compose(self) -> ComposeResult:
        yield Label("idle", id="stage")
        yield ProgressBar(total=None, show_eta=False, id="stage-bar")
        yield Label("", id="stage-detail")

    def set_idle(self, note: str = "idle") -> None:
        self.query_one("#stage", Label).update(note)
        self.query_one("#stage-detail", Label).update("")
        self.query_one(ProgressBar).update(total=100, progress=0)
        self.remove_class("-busy")

    def on_stage(self, event: StageChanged) -> None:
        if event.stage == "idle":
            self.set_idle()
            return
        self.add_class("-busy")
        name = STAGE_LABELS.get(event.stage, event.stage)
        self.query_one("#stage", Label).update(f"round {event.round} · slot {event.slot} · {name}")
        self.query_one("#stage-detail", Label).update(self._detail(event))
        bar = self.query_one(ProgressBar)
        if event.total:
            bar.update(total=event.total, progress=event.done)
        else:
            bar.update(total=None)

    def on_chunk(self, event: StreamChunk) -> None:
        if event.tokens:
            self.query_one("#stage-detail", Label).update(
                display_of(self).rate(event.tokens, event.tokens_per_s)
            )

    @staticmethod
    def _detail(event: StageChanged) -> str:
        if event.stage == "verifying" and event.total:
            suffix = f" · {event.detail}" if event.detail else ""
            return f"trial {event.done} of {event.total}{suffix}"
        if event.stage == "timing" and event.total:
            return f"{event.done} of {event.total} samples" + (
                f" · {event.detail}" if event.detail else ""
            )
        return event.detail
