"""The one source reader: tree-sitter parsers, queries and node helpers for Python and CUDA/C++.

Every module that reads code (reply parsing, the static gate, problem inspection, proposers)
parses through here. Languages, parsers and queries are made once; trees are cached by source
text, so the same code (a reply's block, then the gate's candidate; the problem, for every
candidate) is parsed once. The CUDA grammar (tree-sitter-cuda) is a superset of C++, so it
parses plain C++ extension sources too. Trees are never edited, which makes sharing them safe.
"""

from __future__ import annotations

import ast
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Literal

import tree_sitter_cuda as tscuda
import tree_sitter_python as tspy
from tree_sitter import Language, Node, Parser, Query, QueryCursor, Tree

Lang = Literal["python", "cuda"]
_CACHED_TREES = 16  # a session's problem, the last replies' blocks and their C++ sources


@cache
def language(lang: Lang) -> Language:
    module = tspy if lang == "python" else tscuda
    return Language(module.language())


class _ThreadParsers(threading.local):
    """One parser per language and thread: a tree-sitter parser is not safe to share, and
    reply parsing, the gate (in the evaluation pool) and inspection run on several threads."""

    def __init__(self) -> None:
        self.by_lang: dict[Lang, Parser] = {}


_PARSERS = _ThreadParsers()


def _parser(lang: Lang) -> Parser:
    parser = _PARSERS.by_lang.get(lang)
    if parser is None:
        parser = _PARSERS.by_lang[lang] = Parser(language(lang))
    return parser


@dataclass(frozen=True)
class CPythonError:
    """Why CPython's own parser refuses a source: its message and 1-based position."""

    message: str
    line: int | None
    column: int | None
    syntax: bool  # False: not a SyntaxError (NUL bytes, nesting too deep, out of memory)


@lru_cache(maxsize=_CACHED_TREES)
def cpython_error(source: str) -> CPythonError | None:
    """CPython's diagnosis of ``source`` (parse only, nothing runs), None when it parses.

    tree-sitter decides what the code is; CPython, which accepts exactly what will run, names
    the line and the reason where tree-sitter's error recovery is vague.
    """
    try:
        ast.parse(source)
    except SyntaxError as exc:
        return CPythonError(exc.msg, exc.lineno, exc.offset, syntax=True)
    except (ValueError, RecursionError, MemoryError) as exc:
        return CPythonError(str(exc), None, None, syntax=False)
    return None


@cache
def query(lang: Lang, pattern: str) -> Query:
    return Query(language(lang), pattern)


@lru_cache(maxsize=_CACHED_TREES)
def parse(lang: Lang, source: str) -> Tree:
    return _parser(lang).parse(source.encode("utf-8"))


def parse_python(source: str) -> Tree:
    return parse("python", source)


def parse_cuda(source: str) -> Tree:
    return parse("cuda", source)


def captures(lang: Lang, pattern: str, node: Node) -> dict[str, list[Node]]:
    """Every capture of ``pattern`` under ``node``, by capture name, in document order."""
    found = QueryCursor(query(lang, pattern)).captures(node)
    return {name: sorted(nodes, key=lambda n: n.start_byte) for name, nodes in found.items()}


def matches(lang: Lang, pattern: str, node: Node) -> list[dict[str, list[Node]]]:
    """Each match of ``pattern`` under ``node``, as capture name -> nodes."""
    return [caps for _, caps in QueryCursor(query(lang, pattern)).matches(node)]


def text(node: Node | None) -> str:
    if node is None or node.text is None:
        return ""
    return node.text.decode("utf-8", errors="replace")


def line(node: Node) -> int:
    """1-based line of a node's start."""
    return node.start_point[0] + 1


def position(node: Node) -> tuple[int, int]:
    """1-based (line, column) of a node's start, as editors show it."""
    row, col = node.start_point
    return row + 1, col + 1


def first_error(root: Node) -> Node | None:
    """The first ERROR or MISSING node in document order, or None."""
    if not root.has_error:
        return None
    stack = [root]
    while stack:
        node = stack.pop()
        if node.is_error or node.is_missing:
            return node
        stack.extend(reversed([c for c in node.children if c.has_error or c.is_missing]))
    return None


def unwrap(node: Node) -> Node:
    """The definition inside a ``decorated_definition``; any other node itself."""
    inner = node.child_by_field_name("definition") if node.type == "decorated_definition" else None
    return inner or node


def top_level(block: Node) -> list[Node]:
    """The statements directly in a module or block, decorated definitions unwrapped."""
    return [unwrap(child) for child in block.named_children]


def definitions(block: Node, kind: str) -> dict[str, Node]:
    """``class_definition``/``function_definition`` nodes directly in ``block``, by name."""
    return {text(n.child_by_field_name("name")): n for n in top_level(block) if n.type == kind}


def ancestors(node: Node) -> Iterator[Node]:
    parent = node.parent
    while parent is not None:
        yield parent
        parent = parent.parent


def enclosing(node: Node, *types: str) -> Node | None:
    """The nearest ancestor of one of ``types``, or None."""
    return next((a for a in ancestors(node) if a.type in types), None)


def walk(node: Node) -> Iterator[Node]:
    """Every node under ``node`` (itself included), depth first, in document order."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(current.children))


def dotted_name(node: Node) -> str | None:
    """``a.b.c`` for an identifier/attribute chain, else None (calls, subscripts break it)."""
    if node.type == "identifier":
        return text(node)
    if node.type == "attribute":
        obj = node.child_by_field_name("object")
        attr = node.child_by_field_name("attribute")
        base = dotted_name(obj) if obj is not None else None
        return f"{base}.{text(attr)}" if base is not None and attr is not None else None
    return None


def string_value(node: Node) -> str | None:
    """The value of a Python string literal (or implicitly concatenated literals), or None.

    Interpolations of f-strings are dropped: what the gate needs is the static code.
    """
    if node.type == "concatenated_string":
        parts = [string_value(c) for c in node.named_children if c.type == "string"]
        return "".join(p for p in parts if p is not None)
    if node.type != "string":
        return None
    start = next((c for c in node.children if c.type == "string_start"), None)
    end = next((c for c in node.children if c.type == "string_end"), None)
    if start is None or end is None:
        return None
    prefix = text(start).lower()
    body = "".join(text(c) for c in node.named_children if c.type == "string_content")
    literal = prefix.replace("f", "") + body + text(end)
    try:
        value = ast.literal_eval(literal)
    except (SyntaxError, ValueError):
        return body
    if not isinstance(value, str):
        return body
    return value.replace("{{", "{").replace("}}", "}") if "f" in prefix else value
