"""The prose of a model's reply: ``<think>`` reasoning split off, fenced blocks, sections.

Pure text handling (no parsing of code): the code inside the fences is read by ``parsing``.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass

from cudal1_tui.records import ParsedSections

_SECTION_TITLES = {
    "performance_analysis": r"performance[\s_-]+analysis",
    "algorithm_design": r"algorithm(?:ic)?[\s_-]+design",
    "code_implementation": r"code[\s_-]+implementation",
}
_SECTION_NAMES = {
    "performance_analysis": "Performance Analysis",
    "algorithm_design": "Algorithm Design",
    "code_implementation": "Code Implementation",
}
_FENCE_OPEN = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\n]*)$")
_THINK_OPEN, _THINK_CLOSE = "<think>", "</think>"
_NUMBERING = re.compile(r"^(?:step\s*)?(?:\d+|[ivx]+)[.):]\s*", re.IGNORECASE)


@dataclass
class Fence:
    lang: str
    body: str
    line: int  # 1-based line of the opening fence
    closed: bool


def split_think(content: str, reasoning: str = "") -> tuple[str, str, bool]:
    """Move ``<think>…</think>`` out of ``content``; return (content, reasoning, cut_off).

    One pass with ``str.find`` (a regex retried at every unclosed ``<think>`` was quadratic:
    100 KB of them took 30 s)."""
    thoughts = [reasoning] if reasoning.strip() else []
    if "</think>" in content and "<think>" not in content.split("</think>", 1)[0]:
        before, content = content.split("</think>", 1)  # server dropped the opening tag
        thoughts.append(before.strip())
    kept: list[str] = []
    pos, cut_off = 0, False
    while True:
        start = content.find(_THINK_OPEN, pos)
        end = content.find(_THINK_CLOSE, start + len(_THINK_OPEN)) if start >= 0 else -1
        if start < 0 or end < 0:
            kept.append(content[pos:] if start < 0 else content[pos:start])
            if start >= 0:  # opened and never closed: the rest is reasoning, cut off
                cut_off = True
                thoughts.append(content[start + len(_THINK_OPEN):].strip())
            break
        kept.append(content[pos:start])
        thoughts.append(content[start + len(_THINK_OPEN):end].strip())
        pos = end + len(_THINK_CLOSE)
    return "".join(kept).strip("\n"), "\n\n".join(t for t in thoughts if t), cut_off


def find_fences(text: str) -> list[Fence]:
    """Fenced blocks (backticks or tildes, any language tag), in order."""
    lines = text.split("\n")
    fences: list[Fence] = []
    i = 0
    while i < len(lines):
        match = _FENCE_OPEN.match(lines[i])
        if match is None:
            i += 1
            continue
        char, size = match["fence"][0], len(match["fence"])
        close = re.compile(rf"^[ \t]*{re.escape(char)}{{{size},}}[ \t]*$")
        end = next((j for j in range(i + 1, len(lines)) if close.match(lines[j])), None)
        body = "\n".join(lines[i + 1 : end if end is not None else len(lines)])
        lang = (match["info"].split() or [""])[0].lower()
        fences.append(Fence(lang, textwrap.dedent(body), i + 1, end is not None))
        i = (end if end is not None else len(lines)) + 1
    return fences


def _heading(line: str) -> tuple[str, str] | None:
    """(section key, text after a colon) when ``line`` is a section heading."""
    s = line.strip()
    hashed = s.startswith("#")
    s = s.lstrip("#").strip()
    bold = s[:2] in {"**", "__"}
    s = _NUMBERING.sub("", s.lstrip("*_ ").strip()).lstrip("*_ ")
    for key, pattern in _SECTION_TITLES.items():
        match = re.match(pattern, s, flags=re.IGNORECASE)
        if match is None:
            continue
        rest = s[match.end() :].lstrip("*_ ")
        colon = rest.startswith(":")
        rest = rest.lstrip(":").lstrip("*_ ").strip()
        if hashed or bold or colon or not rest:
            return key, rest if colon else ""
    return None


def extract_sections(text: str) -> tuple[ParsedSections, list[str]]:
    """The three sections' text and warnings (missing or repeated sections)."""
    found: dict[str, list[str]] = {}
    warnings: list[str] = []
    current: list[str] | None = None
    fence: str | None = None
    for line in text.split("\n"):
        match = _FENCE_OPEN.match(line) if fence is None else None
        if fence is not None and re.match(rf"^[ \t]*{re.escape(fence)}+[ \t]*$", line):
            fence = None
        elif match is not None:
            fence = match["fence"]
        heading = _heading(line) if fence is None and match is None else None
        if heading is not None:
            key, rest = heading
            if key in found:
                warnings.append(f"section {_SECTION_NAMES[key]} appears more than once")
                current = found[key]
            else:
                current = found[key] = [rest] if rest else []
        elif current is not None:
            current.append(line)
    for key, title in _SECTION_NAMES.items():
        if key not in found:
            warnings.append(f"missing section: {title}")
    values = {k: "\n".join(v).strip() for k, v in found.items()}
    return ParsedSections(**values), warnings
