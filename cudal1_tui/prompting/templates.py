"""Prompt templates: plain-text files with ``{{name}}`` placeholders.

The shipped templates live in the wheel as ``cudal1_tui/_prompts`` (or the repo's
``prompts/`` in a checkout); a file of the same name in the user's override folder
replaces the shipped one. Every template is checked at load time: each required
placeholder must be present and no unknown one may appear, so a typo in an
override is reported when the app starts, not as a strange prompt later.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from cudal1_tui.config import prompts_override_dir
from cudal1_tui.errors import ConfigError

PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


@dataclass(frozen=True)
class TemplateSpec:
    required: frozenset[str]
    optional: frozenset[str] = frozenset()

    @property
    def allowed(self) -> frozenset[str]:
        return self.required | self.optional


_COMMON = frozenset({"device", "reference_timing"})

SPECS: dict[str, TemplateSpec] = {
    "system.md": TemplateSpec(required=frozenset(), optional=_COMMON),
    "contrastive.md": TemplateSpec(
        required=frozenset({"reference_code", "exemplars"}), optional=_COMMON
    ),
    "repair.md": TemplateSpec(
        required=frozenset({"reference_code", "candidate_code", "error"}),
        optional=_COMMON | {"status"},
    ),
}


@dataclass(frozen=True)
class Templates:
    """The three templates' text, and the file each came from."""

    system: str
    contrastive: str
    repair: str
    sources: dict[str, Path] = field(default_factory=dict)


def shipped_dir() -> Path:
    """Where the shipped templates are: in the wheel, else the checkout's ``prompts/``."""
    package = Path(__file__).resolve().parent.parent
    wheel = package / "_prompts"
    return wheel if wheel.is_dir() else package.parent / "prompts"


def placeholders(text: str) -> set[str]:
    return {m.group(1) for m in PLACEHOLDER.finditer(text)}


def check_template(name: str, text: str, path: Path) -> None:
    """Raise ConfigError when ``text`` lacks a required or uses an unknown placeholder."""
    spec = SPECS[name]
    found = placeholders(text)
    missing = sorted(spec.required - found)
    unknown = sorted(found - spec.allowed)
    if missing:
        raise ConfigError(
            f"prompt template {path} lacks the placeholder(s) "
            + ", ".join("{{" + m + "}}" for m in missing),
            path=path,
        )
    if unknown:
        allowed = ", ".join("{{" + a + "}}" for a in sorted(spec.allowed)) or "none"
        raise ConfigError(
            f"prompt template {path} uses unknown placeholder(s) "
            + ", ".join("{{" + u + "}}" for u in unknown)
            + f"; allowed: {allowed}",
            path=path,
        )


def _read(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"prompt template {path} is not UTF-8 text", path=path) from None
    except OSError as exc:
        message = f"cannot read prompt template {path}: {exc.strerror}"
        raise ConfigError(message, path=path) from None
    if not text.strip():
        raise ConfigError(f"prompt template {path} is empty", path=path)
    return text.replace("\r\n", "\n")


def _locate(name: str, override_dir: Path) -> Path:
    override = override_dir / name
    if override.is_file():
        return override
    shipped = shipped_dir() / name
    if not shipped.is_file():
        raise ConfigError(f"the shipped prompt template {shipped} is missing", path=shipped)
    return shipped


def load_templates(override_dir: Path | None = None) -> Templates:
    """Load and check the templates; ``override_dir`` defaults to the user's config folder."""
    folder = override_dir if override_dir is not None else prompts_override_dir()
    texts: dict[str, str] = {}
    sources: dict[str, Path] = {}
    for name in SPECS:
        path = _locate(name, folder)
        text = _read(path)
        check_template(name, text, path)
        texts[name], sources[name] = text, path
    return Templates(
        system=texts["system.md"],
        contrastive=texts["contrastive.md"],
        repair=texts["repair.md"],
        sources=sources,
    )


def substitute(text: str, values: Mapping[str, str]) -> str:
    """Replace each ``{{name}}`` in one pass: substituted values are never re-expanded."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            raise KeyError(f"no value for placeholder {{{{{name}}}}}")
        return values[name]

    return PLACEHOLDER.sub(replace, text)
