"""Every action of the app, once: its key binding, footer text and palette entry.

The footer shows the few a user needs at every step (and ``? help`` always, even at 80
columns); the help screen and the command palette (``ctrl+p``) list every one of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from cudal1_tui.config import DEFAULT_KEYS

# "app": global, works on every screen; "session": the session screen's own
Scope = Literal["app", "session"]
APP_ACTIONS = frozenset({"settings", "export", "open_session", "help", "quit"})


@dataclass(frozen=True)
class Action:
    binding_id: str  # the name in settings.keys; its default key is DEFAULT_KEYS[binding_id]
    action: str  # the action it runs
    text: str  # footer and help text
    help: str  # what the palette shows under it
    footer: bool = False

    @property
    def key(self) -> str:
        """The default key: the one keymap is ``config.DEFAULT_KEYS``."""
        return DEFAULT_KEYS[self.binding_id]

    @property
    def scope(self) -> Scope:
        return "app" if self.binding_id in APP_ACTIONS else "session"


ACTIONS: tuple[Action, ...] = (
    Action("next_round", "next_round", "next round",
           "ask for and evaluate one more round of candidates", True),
    Action("run_rounds", "run_rounds", "rounds…", "run several rounds in a row"),
    Action("accept", "accept", "accept",
           "accept the selected variant (a git commit; asks first when ≤ 1× or flagged)", True),
    Action("reject", "reject", "reject", "reject the selected variant", True),
    Action("undo", "undo", "undo", "undo the last accept"),
    Action("diff_base", "diff_base", "diff base",
           "diff against the reference, the best or the accepted variant"),
    Action("diff_layout", "diff_layout", "diff layout",
           "switch the diff between unified and side by side"),
    Action("next_tab", "next_tab", "next tab",
           "Diff → Code → Analysis → Model output → Logs"),
    Action("previous_tab", "previous_tab", "previous tab",
           "the detail tab before this one"),
    Action("sort_speedup", "sort('speedup')", "sort by speedup",
           "sort the variants by speedup (again: reverse); a click on a header sorts too"),
    Action("sort_round", "sort('round')", "sort by round", "back to the order they ran in"),
    Action("select_best", "select_best", "select best", "move to the fastest verified row"),
    Action("settings", "settings", "settings", "change settings for this session"),
    Action("export", "export", "export", "export the session as training data or a module"),
    Action("open_session", "open_session", "open", "open a past session"),
    Action("cancel", "cancel", "cancel slot",
           "stop the model reply shown in Model output (the round goes on); with none "
           "streaming, cancel the round", True),
    Action("cancel_round", "cancel_round", "cancel round",
           "cancel the whole running round (finished candidates are kept)"),
    Action("help", "help", "help", "every key and what it does", True),
    Action("quit", "quit", "quit", "save and quit (asks first while a round runs)", True),
)

KEY_NAMES = {"question_mark": "?", "escape": "esc", "right_square_bracket": "]",
             "left_square_bracket": "["}


def key_label(key: str) -> str:
    return KEY_NAMES.get(key, key)
