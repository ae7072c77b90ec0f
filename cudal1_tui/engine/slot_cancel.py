"""Cancel one model slot without cancelling its round.

A ``SlotCancel`` reads as set when either its own flag or the round's cancel event is set,
so the model client (which only polls ``is_set``) stops one stream or all of them.
"""

from __future__ import annotations

import threading


class SlotCancel(threading.Event):
    def __init__(self, round_cancel: threading.Event) -> None:
        super().__init__()
        self._round_cancel = round_cancel

    def is_set(self) -> bool:
        return super().is_set() or self._round_cancel.is_set()

    @property
    def slot_only(self) -> bool:
        """This slot was cancelled while its round goes on."""
        return super().is_set() and not self._round_cancel.is_set()
