"""``session.json``: what a session is about (problem, model, device, settings)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from cudal1_tui.config.settings import SECRET_FIELDS, Settings
from cudal1_tui.errors import SessionError
from cudal1_tui.records import JsonObject

SESSION_SCHEMA_VERSION = 1
META_FILE = "session.json"


@dataclass
class SessionMeta:
    """The contents of ``session.json``.

    ``Session.create`` fills ``session_id``, ``problem_*``, ``created_at`` and ``settings``;
    the caller may pass the rest (model, sampling, device, versions, extra).
    """

    session_id: str = ""
    problem_name: str = ""
    problem_path: str = ""
    problem_source: str = ""
    model: str = ""
    sampling: JsonObject = field(default_factory=dict)
    device: JsonObject = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    created_at: str = ""
    settings: JsonObject = field(default_factory=dict)
    extra: JsonObject = field(default_factory=dict)
    schema_version: int = SESSION_SCHEMA_VERSION

    def to_dict(self) -> JsonObject:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SessionMeta:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def settings_snapshot(settings: Settings) -> JsonObject:
    """Every setting except secrets (api keys never land on disk)."""
    data: JsonObject = asdict(settings)
    for name in SECRET_FIELDS:
        data.pop(name, None)
    return data


def write_meta(directory: Path, meta: SessionMeta) -> None:
    """Write atomically (temp file + rename), so a kill never leaves half a file."""
    target = directory / META_FILE
    tmp = target.with_suffix(".json.tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        json.dump(meta.to_dict(), fh, indent=2)
        fh.write("\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, target)


def read_meta(directory: Path) -> SessionMeta:
    path = directory / META_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SessionError(f"{directory} is not a session (no {META_FILE})",
                           fix="pass a session id from `cudal1-tui sessions`") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise SessionError(f"{path} cannot be read: {exc}",
                           fix="restore the file, or start a new session") from None
    if not isinstance(data, dict):
        raise SessionError(f"{path} is not a JSON object", fix="restore the file")
    return SessionMeta.from_dict(data)
