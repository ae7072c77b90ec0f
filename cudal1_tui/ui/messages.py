"""Textual messages the app's parts exchange (engine events arrive from worker threads)."""

from __future__ import annotations

from textual.message import Message

from cudal1_tui.engine.events import EngineEvent
from cudal1_tui.records import CandidateRecord


class EngineEventPosted(Message):
    """An engine event, posted from the worker thread the engine runs on."""

    def __init__(self, event: EngineEvent) -> None:
        super().__init__()
        self.event = event


class RecordsLoaded(Message):
    """A fresh copy of the session's records, read on a worker thread."""

    def __init__(self, records: list[CandidateRecord]) -> None:
        super().__init__()
        self.records = records


class VariantChosen(Message):
    """The user moved to a row of the variants table."""

    def __init__(self, record_id: str) -> None:
        super().__init__()
        self.record_id = record_id


class RetryRequested(Message):
    """The error banner's Retry button."""
