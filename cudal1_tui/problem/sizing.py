"""Module-level sizes of a problem file: read them, rewrite them, shrink them for CPU tests.

Examples declare H100-sized constants (``batch_size = 4096``) and a comment such as
``# cpu-sizes: batch_size=32, dim=64`` naming CPU-friendly values; rewriting edits exactly
the literal's bytes located by tree-sitter, so comments and layout are kept.
"""

from __future__ import annotations

import ast
import re

from tree_sitter import Node

from cudal1_tui.analysis.source_tree import matches, parse_python, position, text
from cudal1_tui.errors import ProblemError
from cudal1_tui.problem.model import SizeConstant

Number = int | float

_SIZE_QUERY = """
(module (expression_statement
  (assignment left: (identifier) @name right: [(integer) (float)] @value)))
"""
_CPU_COMMENT = re.compile(r"#\s*cpu-sizes\s*:(?P<body>.*)$", re.MULTILINE)
_ITEM = re.compile(r"^\s*(?P<name>[A-Za-z_]\w*)\s*=\s*(?P<value>[-+]?[\w.]+)\s*$")


def constants_in(root: Node) -> list[SizeConstant]:
    """``NAME = <int or float literal>`` statements at module level, in file order."""
    found = []
    for match in matches("python", _SIZE_QUERY, root):
        name, value = match["name"][0], match["value"][0]
        try:
            number = ast.literal_eval(text(value))
        except (ValueError, SyntaxError):
            continue
        if isinstance(number, int | float):
            found.append(SizeConstant(text(name), number, position(name)[0],
                                      value.start_byte, value.end_byte))
    return found


def size_constants(source: str) -> list[SizeConstant]:
    return constants_in(parse_python(source).root_node)


def with_sizes(source: str, overrides: dict[str, Number]) -> str:
    """``source`` with the named module-level sizes set to new values (every assignment)."""
    constants = size_constants(source)
    known = {c.name for c in constants}
    unknown = sorted(set(overrides) - known)
    if unknown:
        listed = ", ".join(sorted(known)) or "none"
        raise ProblemError(
            f"unknown size name(s): {', '.join(unknown)}; the file's module-level sizes are: "
            f"{listed}", fix="name sizes assigned as `NAME = <number>` at module level")
    for name, value in overrides.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ProblemError(f"size {name} must be a number, got {value!r}")
    data = source.encode("utf-8")
    for const in sorted(constants, key=lambda c: c.start_byte, reverse=True):
        if const.name in overrides:
            literal = repr(overrides[const.name]).encode("utf-8")
            data = data[: const.start_byte] + literal + data[const.end_byte:]
    return data.decode("utf-8")


def cpu_sizes(source: str) -> dict[str, Number]:
    """The sizes named by ``# cpu-sizes: a=1, b=2`` comments (several lines merge)."""
    sizes: dict[str, Number] = {}
    for comment in _CPU_COMMENT.finditer(source):
        for item in filter(str.strip, comment["body"].split(",")):
            sizes.update(_parse_item(item))
    return sizes


def _parse_item(item: str) -> dict[str, Number]:
    match = _ITEM.match(item)
    if match is None:
        raise ProblemError(f"cannot read `{item.strip()}` in the `# cpu-sizes:` comment",
                           fix="write it as `# cpu-sizes: batch_size=32, dim=64`")
    try:
        value = ast.literal_eval(match["value"])
    except (ValueError, SyntaxError):
        value = None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ProblemError(f"`{item.strip()}` in the `# cpu-sizes:` comment is not a number",
                           fix="write it as `# cpu-sizes: batch_size=32, dim=64`")
    return {match["name"]: value}


def shrink_for_cpu(source: str) -> str:
    """The problem at its ``# cpu-sizes:`` values; unchanged when it declares none."""
    sizes = cpu_sizes(source)
    return with_sizes(source, sizes) if sizes else source
