"""tree-sitter plumbing for Python problem files: parse, query, locate errors."""

from __future__ import annotations

from functools import cache

import tree_sitter_python as tsp
from tree_sitter import Language, Node, Parser, Query, QueryCursor, Tree


@cache
def language() -> Language:
    return Language(tsp.language())


@cache
def _parser() -> Parser:
    return Parser(language())


@cache
def _query(source: str) -> Query:
    return Query(language(), source)


def parse(source: str) -> Tree:
    return _parser().parse(source.encode("utf-8"))


def matches(pattern: str, node: Node) -> list[dict[str, list[Node]]]:
    """Each match of ``pattern`` under ``node``, as capture name -> nodes."""
    return [captures for _, captures in QueryCursor(_query(pattern)).matches(node)]


def text(node: Node | None) -> str:
    if node is None or node.text is None:
        return ""
    return node.text.decode("utf-8", errors="replace")


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


def top_level(root: Node) -> list[Node]:
    """Module-level statements, with decorated definitions unwrapped."""
    nodes: list[Node] = []
    for child in root.named_children:
        if child.type == "decorated_definition":
            inner = child.child_by_field_name("definition")
            if inner is not None:
                nodes.append(inner)
        else:
            nodes.append(child)
    return nodes
