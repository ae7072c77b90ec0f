"""Engine events rendered for the headless runner: live on a terminal, lines otherwise."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import assert_never

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from cudal1_evaluator.plain_text import shown
from cudal1_tui.engine.events import (
    CandidateFinished,
    DecisionRecorded,
    EngineError,
    EngineEvent,
    ProbeFinished,
    RoundFinished,
    RoundStarted,
    SessionOpened,
    StageChanged,
    StreamChunk,
)
from cudal1_tui.present.speedup import speed_text


@dataclass
class SlotState:
    stage: str = ""
    detail: str = ""
    tokens: int = 0
    rate: float = 0.0
    done: int = 0
    total: int = 0

    def line(self, slot: int) -> str:
        text = f"slot {slot}: {self.stage}"
        if self.total:
            text += f" {self.done}/{self.total}"
        if self.detail:
            text += f" · {self.detail}"
        if self.tokens:
            text += f" · {self.tokens} tok at {self.rate:.1f} tok/s"
        return text


@dataclass
class HeadlessProgress:
    """Call with each event (thread-safe through the engine's emit lock)."""

    console: Console
    problem: str = ""
    round: int = 0
    slots: dict[int, SlotState] = field(default_factory=dict)
    live: Live | None = None
    quiet: bool = False  # another view shows the slots live: no per-stage lines
    tag_slots: bool = False  # several problems print here: slot lines name theirs
    candidates: int = 0
    ok: int = 0
    best: float | None = None

    @property
    def _lines(self) -> bool:
        return self.live is None and not self.quiet

    def _slot(self, slot: int) -> str:
        return f"{self.problem} slot {slot}" if self.tag_slots else f"slot {slot}"

    def start(self) -> None:
        if self.console.is_terminal:
            self.live = Live(self._render(), console=self.console, refresh_per_second=8,
                             transient=True)
            self.live.start()

    def stop(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None

    def __call__(self, event: EngineEvent) -> None:
        self._dispatch(event)
        if self.live is not None:
            self.live.update(self._render())

    def _render(self) -> Group:
        head = Text(f"{self.problem} · round {self.round}", style="bold")
        return Group(head, *(Text("  " + s.line(i)) for i, s in sorted(self.slots.items())))

    def _print(self, text: str, style: str = "") -> None:
        self.console.print(shown(text), style=style, highlight=False, markup=False)

    # -- events ---------------------------------------------------------------------------

    def _dispatch(self, event: EngineEvent) -> None:
        match event:
            case SessionOpened():
                self._on_session_opened(event)
            case ProbeFinished():
                self._on_probe_finished(event)
            case RoundStarted():
                self._on_round_started(event)
            case StageChanged():
                self._on_stage_changed(event)
            case StreamChunk():
                self._on_stream_chunk(event)
            case CandidateFinished():
                self._on_candidate_finished(event)
            case RoundFinished():
                self._on_round_finished(event)
            case EngineError():
                self._on_engine_error(event)
            case DecisionRecorded():
                self._on_decision_recorded(event)
            case _:
                assert_never(event)

    def _on_session_opened(self, e: SessionOpened) -> None:
        self.problem = e.problem_name
        verb = "resumed" if e.resumed else "new"
        self._print(f"{e.problem_name}: {verb} session {e.session_id} ({e.path})")

    def _on_probe_finished(self, e: ProbeFinished) -> None:
        ref = f"{e.reference_ms:.4g} ms" if e.reference_ms is not None else "n/a"
        self._print(f"{self.problem or 'problem'}: probe on {e.device}: reference {ref}"
                    + ("" if e.ok else f" — {e.message}"))

    def _on_round_started(self, e: RoundStarted) -> None:
        self.round, self.slots = e.round, {}
        self._print(f"{self.problem}: round {e.round}: {e.slots} candidate(s)", "bold")

    def _on_stage_changed(self, e: StageChanged) -> None:
        if e.round == 0:
            self._print(f"{self.problem or 'problem'}: {e.stage} {e.detail}".rstrip())
            return
        state = self.slots.setdefault(e.slot, SlotState())
        if self._lines and e.stage != state.stage and state.stage == "generating":
            self._print(f"  {self._slot(e.slot)}: generated {state.tokens} tok at "
                        f"{state.rate:.1f} tok/s")
        if self._lines and e.stage != state.stage:
            self._print(f"  {self._slot(e.slot)}: {e.stage} {e.detail}".rstrip())
        state.stage, state.detail, state.done, state.total = e.stage, e.detail, e.done, e.total

    def _on_stream_chunk(self, e: StreamChunk) -> None:
        state = self.slots.setdefault(e.slot, SlotState(stage="generating"))
        state.tokens, state.rate = e.tokens, e.tokens_per_s

    def _on_candidate_finished(self, e: CandidateFinished) -> None:
        flags = f" flags: {', '.join(e.flags)}" if e.flags else ""
        self.candidates += 1
        self.ok += e.status == "ok"
        self._print(f"  {self._slot(e.slot)}: {e.record_id} {e.source}: {e.status} "
                    f"{speed_text(e.speedup)}{flags}")
        self.slots.pop(e.slot, None)

    def _on_round_finished(self, e: RoundFinished) -> None:
        tail = " (cancelled)" if e.cancelled else ""
        self.best = e.best_speedup
        best = speed_text(e.best_speedup)
        self._print(f"{self.problem}: round {e.round} done, best so far {best}{tail}")

    def _on_engine_error(self, e: EngineError) -> None:
        self._print(f"{self.problem or 'engine'}: {e.message}", "yellow")
        if e.fix:
            self._print(f"  fix: {e.fix}", "yellow")

    def _on_decision_recorded(self, e: DecisionRecorded) -> None:
        self._print(f"  {e.decision} {e.record_id} {e.commit[:10]}".rstrip())


SUMMARY_COLUMNS = (("problem", "problem"), ("candidates", "candidates"), ("ok", "ok"),
                   ("best", "best speedup"), ("source", "best source"), ("session", "session"),
                   ("note", "note"))


def summary_table(rows: list[dict[str, str]], caption: str = "") -> Table:
    """One row per problem; ``note`` says why a problem produced nothing (a broken file)."""
    table = Table(title="cudal1-tui run summary", caption=caption or None)
    keys = [(k, title) for k, title in SUMMARY_COLUMNS
            if k != "note" or any(row.get("note") for row in rows)]
    for _, title in keys:
        table.add_column(title, overflow="fold")
    for row in rows:
        table.add_row(*(row.get(k, "") for k, _ in keys))
    return table
