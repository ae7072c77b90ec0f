"""Tree-sitter highlighting for candidate code: Python, with CUDA inside its strings.

Candidates embed their CUDA sources in Python string literals (``load_inline``);
those strings are parsed again with the CUDA grammar so kernels are highlighted
too. The same parse finds the CUDA sources for the Code tab's CUDA view.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

import textual
import tree_sitter_c
import tree_sitter_cpp
import tree_sitter_cuda
import tree_sitter_python
from rich.text import Text
from tree_sitter import Language, Node, Parser, Query, QueryCursor

CUDA_HINT = re.compile(r"__global__|#include|torch::|at::Tensor|blockIdx|__device__")

STYLES: dict[str, str] = {
    "comment": "italic #7f848e",
    "string": "#98c379",
    "keyword": "#c678dd",
    "function": "#61afef",
    "method": "#61afef",
    "type": "#e5c07b",
    "class": "#e5c07b",
    "constructor": "#e5c07b",
    "number": "#d19a66",
    "float": "#d19a66",
    "boolean": "#d19a66",
    "constant": "#d19a66",
    "operator": "#56b6c2",
    "decorator": "#e5c07b",
    "property": "#e06c75",
    "include": "#c678dd",
}


@dataclass(frozen=True)
class _Grammar:
    language: Language
    query: Query


def _scm(package: object) -> str:
    path = Path(str(getattr(package, "__file__", ""))).parent / "queries" / "highlights.scm"
    return path.read_text(encoding="utf-8") if path.is_file() else ""


@cache
def cuda_highlight_query() -> str:
    """C + C++ + CUDA highlight queries: the CUDA grammar extends C++ which extends C."""
    return "\n".join(_scm(m) for m in (tree_sitter_c, tree_sitter_cpp, tree_sitter_cuda))


@cache
def python_highlight_query() -> str:
    return (resources.files(textual) / "tree-sitter" / "highlights" / "python.scm").read_text(
        encoding="utf-8"
    )


@cache
def cuda_language() -> Language:
    return Language(tree_sitter_cuda.language())


@cache
def _python() -> _Grammar:
    lang = Language(tree_sitter_python.language())
    return _Grammar(lang, Query(lang, python_highlight_query()))


@cache
def _cuda() -> _Grammar:
    lang = cuda_language()
    return _Grammar(lang, Query(lang, cuda_highlight_query()))


def _style_for(capture: str) -> str:
    while capture:
        if capture in STYLES:
            return STYLES[capture]
        capture = capture.rpartition(".")[0]
    return ""


class _Offsets:
    """Byte offset → character offset (tree-sitter speaks bytes, rich speaks chars)."""

    def __init__(self, data: bytes) -> None:
        self._table: list[int] | None = None
        if not data.isascii():
            table = [0] * (len(data) + 1)
            chars = 0
            for i, byte in enumerate(data):
                table[i] = chars
                if byte & 0xC0 != 0x80:
                    chars += 1
            table[len(data)] = chars
            self._table = table

    def __call__(self, byte: int) -> int:
        return byte if self._table is None else self._table[byte]


def _spans(grammar: _Grammar, root: Node, base: int) -> list[tuple[int, int, str]]:
    spans: list[tuple[int, int, str]] = []
    for name, nodes in QueryCursor(grammar.query).captures(root).items():
        style = _style_for(name)
        if style:
            spans.extend((base + n.start_byte, base + n.end_byte, style) for n in nodes)
    return spans


def _cuda_strings(root: Node) -> list[Node]:
    found: list[Node] = []
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type == "string_content":
            if CUDA_HINT.search((node.text or b"").decode("utf-8", "replace")):
                found.append(node)
            continue
        stack.extend(reversed(node.children))
    return found


def cuda_sources(code: str) -> list[str]:
    """The CUDA/C++ sources a candidate embeds in Python strings, in file order."""
    tree = Parser(_python().language).parse(code.encode("utf-8"))
    return [(n.text or b"").decode("utf-8", "replace") for n in _cuda_strings(tree.root_node)]


def highlight(code: str) -> Text:
    """The whole source as rich Text, Python and embedded CUDA highlighted."""
    data = code.encode("utf-8")
    tree = Parser(_python().language).parse(data)
    spans = _spans(_python(), tree.root_node, 0)
    cuda_parser = Parser(_cuda().language)
    for node in _cuda_strings(tree.root_node):
        inner = cuda_parser.parse(data[node.start_byte:node.end_byte])
        spans = [s for s in spans if not (s[0] <= node.start_byte and s[1] >= node.end_byte)]
        spans.extend(_spans(_cuda(), inner.root_node, node.start_byte))
    offsets = _Offsets(data)
    text = Text(code)
    # Wide spans first so the narrower, more specific captures win.
    for start, end, style in sorted(spans, key=lambda s: s[0] - s[1], reverse=True):
        text.stylize(style, offsets(start), offsets(end))
    return text


def highlight_lines(code: str) -> list[Text]:
    lines = highlight(code).split("\n", allow_blank=True)
    return list(lines)[: len(code.split("\n"))]
