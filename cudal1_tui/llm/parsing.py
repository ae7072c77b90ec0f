"""Parse a model's reply: its three sections, its code, and whether that code can be a candidate.

Never raises on a bad reply: every problem becomes ``ParsedReply.error`` (the
reason the reply yields no candidate) or a warning. Validation is static: the code is
read through the one source reader (``analysis.source_tree``, which caches trees, so the
gate reads the same tree later); nothing from the reply runs here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tree_sitter import Node

from cudal1_tui.analysis import source_tree as ts
from cudal1_tui.llm.reply_text import Fence, extract_sections, find_fences, split_think
from cudal1_tui.llm.signature_check import check_signature
from cudal1_tui.problem.model import ClassSignature
from cudal1_tui.problem.signature import class_signature
from cudal1_tui.records import ParsedSections

__all__ = ["TRUNCATED", "TRUNCATED_THINK", "ParsedReply", "class_names", "parse_reply",
           "syntax_error"]

TRUNCATED = "reply was cut off (unclosed code block); raise max_tokens"
TRUNCATED_THINK = (
    "reply was cut off inside its <think> reasoning (no answer after it); raise max_tokens"
)
_PYTHON_TAGS = {"", "python", "py", "python3", "py3", "ipython"}
_PROSE_TRIES = 8


@dataclass
class ParsedReply:
    """``error`` non-empty: the reply yields no candidate (``code`` keeps what was found)."""

    sections: ParsedSections
    code: str
    error: str = ""
    warnings: list[str] = field(default_factory=list)
    reasoning: str = ""

    @property
    def ok(self) -> bool:
        return not self.error and bool(self.code)


# --- syntax -----------------------------------------------------------------------------------


def _innermost_error(node: Node) -> Node | None:
    """The first ERROR or MISSING node, descending into nested ones."""
    if not node.has_error and not node.is_missing:
        return None
    for child in node.children:
        found = _innermost_error(child)
        if found is not None:
            return found
    return node if node.type == "ERROR" or node.is_missing else None


def _python_error(code: str) -> str:
    """CPython's own diagnosis (parse only, nothing runs): it names the line and the reason."""
    error = ts.cpython_error(code)
    if error is None:
        return ""
    if not error.syntax:  # e.g. NUL bytes, deep nesting
        return error.message
    return f"line {error.line}, column {error.column}: {error.message}"


def syntax_error(code: str) -> str:
    """``""`` when ``code`` parses cleanly, else where the first error is (1-based).

    tree-sitter decides; CPython's parser, when it also fails, gives the message
    (its location is exact where tree-sitter's error recovery is vague).
    """
    root = ts.parse_python(code).root_node
    python = _python_error(code)
    if not root.has_error:
        return f"syntax error at {python}" if python else ""
    if python:
        return f"syntax error at {python}"
    bad = _innermost_error(root) or root
    row, col = bad.start_point
    what = f"missing {bad.type}" if bad.is_missing else "syntax error"
    return f"{what} at line {row + 1}, column {col + 1}"


def _classes(code: str) -> dict[str, Node]:
    return ts.definitions(ts.parse_python(code).root_node, "class_definition")


def class_names(code: str) -> list[str]:
    """Top-level class names defined in ``code``."""
    return [ts.text(n.child_by_field_name("name"))
            for n in ts.top_level(ts.parse_python(code).root_node)
            if n.type == "class_definition"]


# --- code -------------------------------------------------------------------------------------


def _defines_model_new(code: str) -> bool:
    return "ModelNew" in code and "ModelNew" in class_names(code)


def _strip_prose(code: str) -> tuple[str, int]:
    """Drop up to a few unindented prose lines at the top or bottom so the code parses.

    Only cuts that remove the line CPython stops at are tried: each try is a full parse, and
    trying every cut re-parsed a 400 KB reply 81 times."""
    if "class ModelNew" not in code:
        return code, 0
    lines = code.strip("\n").split("\n")
    bad = _error_line(code.strip("\n"))
    if bad is None:
        return code, 0  # it parses: dropping lines cannot add a class
    for head in range(_PROSE_TRIES + 1):
        for tail in range(_PROSE_TRIES + 1):
            if (not head and not tail) or head + tail >= len(lines):
                continue
            if not (bad <= head or bad > len(lines) - tail):
                continue
            dropped = lines[:head] + lines[len(lines) - tail :]
            if any(d[:1] in {" ", "\t"} for d in dropped):
                continue
            kept = "\n".join(lines[head : len(lines) - tail])
            # CPython first: only a cut it accepts is parsed into a (cached) tree
            if _error_line(kept) is None and not syntax_error(kept) and _defines_model_new(kept):
                return kept, head + tail
    return code, 0


def _error_line(code: str) -> int | None:
    """The line CPython's parser stops at (1-based), or None when the code parses."""
    error = ts.cpython_error(code)
    if error is None:
        return None
    return (error.line or 1) if error.syntax else 1


def _pick_block(fences: list[Fence]) -> tuple[Fence | None, list[str]]:
    """The last python block defining ModelNew, else the last python block."""
    python = [f for f in fences if f.lang in _PYTHON_TAGS]
    other = [f for f in fences if f.lang not in _PYTHON_TAGS]
    warnings: list[str] = []
    with_model = [f for f in python if "class ModelNew" in f.body]
    if with_model:
        if with_model[-1] is not python[-1]:
            warnings.append("the last python block does not define ModelNew; used an earlier one")
        return with_model[-1], warnings
    tagged = [f for f in other if "class ModelNew" in f.body]
    if tagged:
        warnings.append(f"the code defining ModelNew is tagged {tagged[-1].lang!r}, not python")
        return tagged[-1], warnings
    return (python[-1] if python else None), warnings


def _unfenced(text: str, sections: ParsedSections) -> str:
    for candidate in (text, sections.code_implementation):
        if candidate.strip() and not syntax_error(candidate) and _defines_model_new(candidate):
            return candidate.strip("\n") + "\n"
        if candidate.strip():
            stripped, dropped = _strip_prose(candidate)
            if dropped:
                return stripped + "\n"
    return ""


def _validate(
    code: str, reference: ClassSignature | None, strict_names: bool
) -> tuple[str, list[str]]:
    """(error, warnings) of a code block as a candidate."""
    error = syntax_error(code)
    if error:
        return f"the code does not parse: {error}", []
    names = class_names(code)
    if "ModelNew" not in names:
        found = ", ".join(names) if names else "none"
        return f"the code defines no class ModelNew (classes found: {found})", []
    if reference is None:
        return "", []
    cand = class_signature(_classes(code)["ModelNew"])
    errors, warnings = check_signature(cand, reference, strict_names=strict_names)
    return "; ".join(errors), warnings


def _extract_code(content: str, sections: ParsedSections) -> tuple[str, str, list[str]]:
    """(code, error, warnings) before validation."""
    fences = find_fences(content)
    if fences and not fences[-1].closed:
        return "", TRUNCATED, []
    block, warnings = _pick_block(fences)
    if block is None:
        code = _unfenced(content, sections)
        if code:
            return code, "", ["the code was not in a fenced block"]
        other = sorted({f.lang for f in fences})
        why = f" (only {', '.join(other)} blocks)" if other else ""
        return "", f"the reply has no python code block{why}", []
    code = block.body.strip("\n") + "\n"
    if syntax_error(code):
        stripped, dropped = _strip_prose(code)
        if dropped:
            warnings.append(f"dropped {dropped} line(s) of prose inside the code block")
            code = stripped + "\n"
    return code, "", warnings


def parse_reply(
    text: str,
    reasoning: str = "",
    *,
    model_signature: ClassSignature | None,
    strict_names: bool = False,
) -> ParsedReply:
    """Sections, code and validity of a reply. ``model_signature``: the reference Model's."""
    content, thoughts, cut_in_think = split_think(text.replace("\r\n", "\n"), reasoning)
    sections, warnings = extract_sections(content)
    if not content.strip():
        why = TRUNCATED_THINK if cut_in_think else "the reply is empty"
        return ParsedReply(sections, "", why, warnings, thoughts)
    code, error, more = _extract_code(content, sections)
    warnings += more
    if not error:
        error, more = _validate(code, model_signature, strict_names)
        warnings += more
    return ParsedReply(sections, code, error, warnings, thoughts)
