"""The one keymap: each action's default key, and the check of a user's ``[keys]`` table.

The app's bindings take their default keys from here (``ui/actions.py``); a config file
overrides them by binding id. A table that names an unknown action, leaves a key empty or
binds one key to two actions is refused at load, with the line it came from.
"""

from __future__ import annotations

from collections.abc import Mapping

DEFAULT_KEYS: dict[str, str] = {
    "next_round": "n",
    "run_rounds": "N",
    "accept": "a",
    "reject": "r",
    "undo": "u",
    "diff_base": "b",
    "diff_layout": "v",
    "next_tab": "right_square_bracket",
    "previous_tab": "left_square_bracket",
    "sort_speedup": "S",
    "sort_round": "R",
    "select_best": "B",
    "settings": "s",
    "export": "e",
    "open_session": "o",
    "cancel": "escape",
    "cancel_round": "X",
    "help": "question_mark",
    "quit": "q",
}


def _keys_of(spec: str) -> list[str]:
    """Textual's key spec: one key, or several separated by commas."""
    return [key.strip() for key in spec.split(",")]


def _user_set(binding_id: str, keys: Mapping[str, str]) -> bool:
    return keys.get(binding_id) != DEFAULT_KEYS.get(binding_id)


def key_problem(keys: Mapping[str, str]) -> tuple[str, str] | None:
    """(the binding id to point at, what is wrong) for the first bad entry; None if all fine."""
    unknown = [name for name in keys if name not in DEFAULT_KEYS]
    if unknown:
        known = ", ".join(DEFAULT_KEYS)
        return unknown[0], f"unknown key binding {unknown[0]!r} (known: {known})"
    owners: dict[str, str] = {}
    for binding_id, spec in keys.items():
        for key in _keys_of(spec):
            if not key:
                return binding_id, f"the key for {binding_id} is empty"
            other = owners.setdefault(key, binding_id)
            if other != binding_id:
                blamed = binding_id if _user_set(binding_id, keys) else other
                return blamed, f"key {key!r} is bound to both {other} and {binding_id}"
    return None
