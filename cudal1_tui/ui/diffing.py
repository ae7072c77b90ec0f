"""Diffs between two sources, rendered with difflib and tree-sitter highlighting."""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from cudal1_tui.ui.code_highlight import highlight_lines

Layout = Literal["unified", "split"]
CONTEXT = 3
ADDED = "on #1e3a24"
REMOVED = "on #3f1d22"
GUTTER = "#5c6370"


@dataclass(frozen=True)
class DiffLine:
    kind: Literal["equal", "insert", "delete", "skip"]
    old_no: int | None
    new_no: int | None


def diff_lines(old: list[str], new: list[str], context: int = CONTEXT) -> Iterator[DiffLine]:
    """Unified-diff rows with ``context`` equal lines around each change."""
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    for group_index, group in enumerate(matcher.get_grouped_opcodes(context)):
        if group_index:
            yield DiffLine("skip", None, None)
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                for k in range(i2 - i1):
                    yield DiffLine("equal", i1 + k, j1 + k)
                continue
            if tag in ("replace", "delete"):
                for i in range(i1, i2):
                    yield DiffLine("delete", i, None)
            if tag in ("replace", "insert"):
                for j in range(j1, j2):
                    yield DiffLine("insert", None, j)


def _numbered(no: int | None, width: int) -> Text:
    return Text(" " * width if no is None else f"{no + 1:>{width}}", style=GUTTER)


def _marked(line: Text, mark: str, style: str) -> Text:
    out = Text(mark + " ", style=style)
    out.append_text(line)
    out.stylize(style)
    return out


def stats(old: str, new: str) -> tuple[int, int]:
    added = removed = 0
    for row in diff_lines(old.split("\n"), new.split("\n"), context=0):
        added += row.kind == "insert"
        removed += row.kind == "delete"
    return added, removed


def render_diff(old: str, new: str, layout: Layout = "unified") -> RenderableType:
    old_hl, new_hl = highlight_lines(old), highlight_lines(new)
    rows = list(diff_lines(old.split("\n"), new.split("\n")))
    if not rows:
        return Text("no differences", style="dim")
    width = len(str(max(len(old_hl), len(new_hl))))
    if layout == "split":
        return _split(rows, old_hl, new_hl, width)
    return _unified(rows, old_hl, new_hl, width)


def _unified(rows: list[DiffLine], old: list[Text], new: list[Text], width: int) -> Group:
    lines: list[Text] = []
    for row in rows:
        if row.kind == "skip":
            lines.append(Text("⋯", style=GUTTER))
            continue
        gutter = Text.assemble(_numbered(row.old_no, width), " ", _numbered(row.new_no, width), " ")
        if row.kind == "delete" and row.old_no is not None:
            body = _marked(old[row.old_no], "-", REMOVED)
        elif row.kind == "insert" and row.new_no is not None:
            body = _marked(new[row.new_no], "+", ADDED)
        else:
            body = _marked(new[row.new_no] if row.new_no is not None else Text(), " ", "")
        lines.append(Text.assemble(gutter, body, no_wrap=True))
    return Group(*lines)


def _split(rows: list[DiffLine], old: list[Text], new: list[Text], width: int) -> Table:
    table = Table(show_header=False, box=None, padding=(0, 1), expand=True)
    for ratio in (None, 1, None, 1):
        if ratio is None:
            table.add_column(width=width, no_wrap=True)
        else:
            table.add_column(ratio=ratio, no_wrap=True, overflow="crop")
    pending: list[int] = []

    def flush() -> None:
        for left in pending:
            table.add_row(*_side(left, old, REMOVED, width), Text(), Text())
        pending.clear()

    for row in rows:
        if row.kind == "delete" and row.old_no is not None:
            pending.append(row.old_no)
        elif row.kind == "insert" and row.new_no is not None:
            left = pending.pop(0) if pending else None
            table.add_row(*_side(left, old, REMOVED, width), *_side(row.new_no, new, ADDED, width))
        else:
            flush()
            if row.kind == "skip":
                table.add_row(Text("⋯", style=GUTTER), Text(), Text("⋯", style=GUTTER), Text())
            elif row.old_no is not None and row.new_no is not None:
                cells = (*_side(row.old_no, old, "", width), *_side(row.new_no, new, "", width))
                table.add_row(*cells)
    flush()
    return table


def _side(no: int | None, lines: list[Text], style: str, width: int) -> tuple[Text, Text]:
    if no is None:
        return Text(), Text()
    body = lines[no].copy()
    if style:
        body.stylize(style)
    return _numbered(no, width), body
