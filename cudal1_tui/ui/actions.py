"""Every action of the app, once: its key binding, footer text and palette entry.

The footer shows the few a user needs at every step (and ``? help`` always, even at 80
columns); the help screen and the command palette (``ctrl+p``) list every one of them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Action:
    binding_id: str  # the name in settings.keys
    key: str  # the default key; "" for palette-only actions
    action: str  # the app action it runs
    text: str  # footer and help text
    help: str  # what the palette shows under it
    footer: bool = False


ACTIONS: tuple[Action, ...] = (
    Action("next_round", "n", "next_round", "next round",
           "ask for and evaluate one more round of candidates", True),
    Action("run_rounds", "N", "run_rounds", "rounds…", "run several rounds in a row"),
    Action("accept", "a", "accept", "accept",
           "accept the selected variant (a git commit; asks first when ≤ 1× or flagged)", True),
    Action("reject", "r", "reject", "reject", "reject the selected variant", True),
    Action("undo", "u", "undo", "undo", "undo the last accept"),
    Action("diff_base", "b", "diff_base", "diff base",
           "diff against the reference, the best or the accepted variant"),
    Action("diff_layout", "v", "diff_layout", "diff layout",
           "switch the diff between unified and side by side"),
    Action("next_tab", "right_square_bracket", "next_tab", "next tab",
           "Diff → Code → Analysis → Model output → Logs"),
    Action("previous_tab", "left_square_bracket", "previous_tab", "previous tab",
           "the detail tab before this one"),
    Action("sort_speedup", "S", "sort('speedup')", "sort by speedup",
           "sort the variants by speedup (again: reverse); a click on a header sorts too"),
    Action("sort_round", "R", "sort('round')", "sort by round", "back to the order they ran in"),
    Action("select_best", "B", "select_best", "select best", "move to the fastest verified row"),
    Action("settings", "s", "settings", "settings", "change settings for this session"),
    Action("export", "e", "export", "export", "export the session as training data or a module"),
    Action("open_session", "o", "open_session", "open", "open a past session"),
    Action("cancel", "escape", "cancel", "cancel slot",
           "stop the model reply shown in Model output (the round goes on); with none "
           "streaming, cancel the round", True),
    Action("cancel_round", "X", "cancel_round", "cancel round",
           "cancel the whole running round (finished candidates are kept)"),
    Action("help", "question_mark", "help", "help", "every key and what it does", True),
    Action("quit", "q", "quit", "quit", "save and quit (asks first while a round runs)", True),
)

KEY_NAMES = {"question_mark": "?", "escape": "esc", "right_square_bracket": "]",
             "left_square_bracket": "["}


def key_label(key: str) -> str:
    return KEY_NAMES.get(key, key)
