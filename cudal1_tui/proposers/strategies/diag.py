"""Algebraic rewrite: a product with a diagonal matrix becomes a broadcast multiply.

``torch.diag(a) @ B`` (or ``torch.matmul``/``torch.mm``) scales B's rows by ``a``:
``a.unsqueeze(-1) * B``; ``B @ torch.diag(a)`` scales its columns: ``B * a``. That
turns an O(n²m) matmul plus an n×n allocation into O(nm) element-wise work.
"""

from __future__ import annotations

from dataclasses import dataclass

from tree_sitter import Node

from cudal1_tui.analysis.source_tree import parse_python, text
from cudal1_tui.proposers.source_surgery import rename_class
from cudal1_tui.proposers.strategies.base import BuiltinCandidate, Context

DIAG_FUNCTIONS = frozenset({"torch.diag", "diag"})
MATMUL_FUNCTIONS = frozenset({"torch.matmul", "torch.mm", "matmul", "mm"})
_ATOMIC = frozenset({"identifier", "attribute", "call", "subscript", "parenthesized_expression"})


@dataclass(frozen=True)
class Rewrite:
    start: int
    end: int
    replacement: str


def _diag_operand(node: Node) -> Node | None:
    """``x`` when ``node`` is ``torch.diag(x)`` with a single argument, else None."""
    if node.type != "call" or text(node.child_by_field_name("function")) not in DIAG_FUNCTIONS:
        return None
    args = node.child_by_field_name("arguments")
    named = [c for c in (args.named_children if args else []) if c.type != "comment"]
    if len(named) != 1 or named[0].type in ("keyword_argument", "list_splat", "dictionary_splat"):
        return None
    return named[0]


def _wrap(node: Node) -> str:
    return text(node) if node.type in _ATOMIC else f"({text(node)})"


def _pair(left: Node, right: Node) -> str | None:
    diag_left, diag_right = _diag_operand(left), _diag_operand(right)
    if diag_left is not None and diag_right is None:
        return f"{_wrap(diag_left)}.unsqueeze(-1) * {_wrap(right)}"
    if diag_right is not None and diag_left is None:
        return f"{_wrap(left)} * {_wrap(diag_right)}"
    return None


def _operands(node: Node) -> tuple[Node, Node] | None:
    if node.type == "binary_operator":
        op = node.child_by_field_name("operator")
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
        if op is not None and text(op) == "@" and left is not None and right is not None:
            return left, right
    if node.type == "call" and text(node.child_by_field_name("function")) in MATMUL_FUNCTIONS:
        args = node.child_by_field_name("arguments")
        named = [c for c in (args.named_children if args else []) if c.type != "comment"]
        if len(named) == 2 and all(c.type != "keyword_argument" for c in named):
            return named[0], named[1]
    return None


def find_rewrites(source: str) -> list[Rewrite]:
    """Outermost diagonal products in ``source``, as byte-range replacements."""
    found: list[Rewrite] = []
    stack = [parse_python(source).root_node]
    while stack:
        node = stack.pop()
        pair = _operands(node)
        replacement = _pair(*pair) if pair else None
        if replacement is not None:
            found.append(Rewrite(node.start_byte, node.end_byte, replacement))
            continue
        stack.extend(node.children)
    return sorted(found, key=lambda r: r.start)


def candidates(ctx: Context) -> list[BuiltinCandidate]:
    rewrites = find_rewrites(ctx.problem_source)
    if not rewrites:
        return []
    body = rename_class(ctx.problem_source, "ModelNew",
                        extra=[(r.start, r.end, r.replacement) for r in rewrites])
    code = ("# Built-in candidate: products with a diagonal matrix rewritten as broadcast "
            "multiplies.\n" + body)
    return [BuiltinCandidate(
        "diag-broadcast", code,
        f"{len(rewrites)} product(s) with torch.diag(...) rewritten as a broadcast multiply")]
