"""The model's output: streamed live while generating; the reasoning collapsible.

Several slots of a round stream at once. Each slot's text is buffered; the view follows
one slot (the first to stream) and moves to another still streaming when it finishes,
replaying that slot's buffer, so no text is lost and the view never flickers between them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Collapsible, Label, Log

from cudal1_tui.engine.events import StreamChunk
from cudal1_tui.records import CandidateRecord
from cudal1_tui.ui.display import display_of

Key = tuple[int, int]  # (round, slot)


@dataclass
class _Stream:
    reasoning: list[str] = field(default_factory=list)
    content: list[str] = field(default_factory=list)
    rate: str = ""


class ModelOutput(Vertical):
    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._streams: dict[Key, _Stream] = {}
        self._follow: Key | None = None

    def compose(self) -> ComposeResult:
        yield Label("no output yet", id="output-title")
        with Collapsible(title="Reasoning", collapsed=True, id="reasoning-box"):
            yield Log(id="reasoning", max_lines=5000)
        yield Log(id="content", max_lines=20000)

    @property
    def live(self) -> Key | None:
        return self._follow

    def on_chunk(self, event: StreamChunk) -> None:
        key = (event.round, event.slot)
        stream = self._streams.setdefault(key, _Stream())
        (stream.reasoning if event.kind == "reasoning" else stream.content).append(event.text)
        if event.tokens:
            stream.rate = display_of(self).rate(event.tokens, event.tokens_per_s)
        if self._follow is None:
            self._show_stream(key)
        elif key == self._follow:
            target = "#reasoning" if event.kind == "reasoning" else "#content"
            self.query_one(target, Log).write(event.text)
            self._title()

    def slot_finished(self, round_: int, slot: int) -> None:
        """A slot reached its verdict: follow another one still streaming, if any."""
        self._streams.pop((round_, slot), None)
        if self._follow == (round_, slot):
            self._follow = None
            if self._streams:
                self._show_stream(min(self._streams))

    def end_live(self) -> None:
        self._streams.clear()
        self._follow = None

    def _show_stream(self, key: Key) -> None:
        self._follow = key
        stream = self._streams[key]
        self._reset("")
        self.query_one("#reasoning", Log).write("".join(stream.reasoning))
        self.query_one("#content", Log).write("".join(stream.content))
        self._title()

    def _title(self) -> None:
        if self._follow is None:
            return
        round_, slot = self._follow
        others = len(self._streams) - 1
        more = f" · {others} more streaming" if others > 0 else ""
        rate = self._streams[self._follow].rate
        self.query_one("#output-title", Label).update(
            f"live · round {round_} · slot {slot}" + (f" · {rate}" if rate else "") + more
        )

    def _reset(self, title: str) -> None:
        self.query_one("#output-title", Label).update(title)
        self.query_one("#reasoning", Log).clear()
        self.query_one("#content", Log).clear()

    def show_record(self, record: CandidateRecord) -> None:
        if self._follow is not None:
            return
        if not record.raw_response and not record.reasoning:
            self._reset(f"round {record.round} · slot {record.slot} · {record.source}: "
                        "no model output (built-in variant)")
            return
        self._reset(f"round {record.round} · slot {record.slot} · {record.model or 'model'}")
        self.query_one("#reasoning", Log).write(record.reasoning)
        self.query_one("#content", Log).write(record.raw_response)
