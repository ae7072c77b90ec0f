"""Write settings changed in the app back to the TOML config file.

Only top-level scalar keys are written: an existing ``key = …`` line is replaced in place
(comments and the rest of the file stay as they are), a new key is appended.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path

from cudal1_tui.errors import ConfigError

Scalar = str | int | float | bool


def toml_value(value: Scalar) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return json.dumps(value, ensure_ascii=False)  # a TOML basic string


def save_settings(path: Path, changes: Mapping[str, Scalar]) -> Path:
    """Merge ``changes`` into the config file at ``path`` (created when missing)."""
    try:
        text = path.read_text(encoding="utf-8") if path.is_file() else ""
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc}", path=path) from None
    for key, value in changes.items():
        line = f"{key} = {toml_value(value)}"
        pattern = re.compile(rf"^[ \t]*{re.escape(key)}[ \t]*=.*$", re.MULTILINE)
        # a table header ends the top level: only lines before the first one are ours
        head, sep, tail = text.partition("\n[")
        if pattern.search(head):
            head = pattern.sub(line.replace("\\", "\\\\"), head, count=1)
        else:
            head = (head.rstrip("\n") + "\n" if head.strip() else "") + line + "\n"
        text = head + sep + tail
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        raise ConfigError(f"cannot write {path}: {exc}", path=path) from None
    return path
