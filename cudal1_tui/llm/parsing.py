"""Parse a model's reply: its three sections, its code, and whether that code can be a candidate.

Never raises on a bad reply: every problem becomes ``ParsedReply.error`` (the
reason the reply yields no candidate) or a warning. Validation is static
(tree-sitter); nothing from the reply runs here.
"""

from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

import tree_sitter_python
from tree_sitter import Language, Node, Parser

from cudal1_tui.records import ParsedSections

ParamKind = Literal[
    "positional", "positional_only", "keyword_only", "var_positional", "var_keyword"
]
TRUNCATED = "reply was cut off (unclosed code block); raise max_tokens"
TRUNCATED_THINK = (
    "reply was cut off inside its <think> reasoning (no answer after it); raise max_tokens"
)
_PYTHON_TAGS = {"", "python", "py", "python3", "py3", "ipython"}
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
_PROSE_TRIES = 8


@dataclass(frozen=True)
class Param:
    name: str
    kind: ParamKind = "positional"
    has_default: bool = False


@dataclass(frozen=True)
class Signature:
    """A class's ``__init__`` and ``forward`` parameters (without ``self``).

    ``None`` for a method the class body does not define (it is inherited).
    """

    init: tuple[Param, ...] | None
    forward: tuple[Param, ...] | None
    bases: tuple[str, ...] = ()


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


@dataclass
class Fence:
    lang: str
    body: str
    line: int  # 1-based line of the opening fence
    closed: bool


# --- tree-sitter -----------------------------------------------------------------------------


@lru_cache(maxsize=1)
def _parser() -> Parser:
    return Parser(Language(tree_sitter_python.language()))


def _tree(code: str) -> Node:
    return _parser().parse(code.encode("utf-8")).root_node


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
    try:
        ast.parse(code)
    except SyntaxError as exc:
        return f"line {exc.lineno}, column {exc.offset}: {exc.msg}"
    except (ValueError, RecursionError, MemoryError) as exc:  # e.g. NUL bytes, deep nesting
        return str(exc)
    return ""


def syntax_error(code: str) -> str:
    """``""`` when ``code`` parses cleanly, else where the first error is (1-based).

    tree-sitter decides; CPython's parser, when it also fails, gives the message
    (its location is exact where tree-sitter's error recovery is vague).
    """
    root = _tree(code)
    python = _python_error(code)
    if not root.has_error:
        return f"syntax error at {python}" if python else ""
    if python:
        return f"syntax error at {python}"
    bad = _innermost_error(root) or root
    row, col = bad.start_point
    what = f"missing {bad.type}" if bad.is_missing else "syntax error"
    return f"{what} at line {row + 1}, column {col + 1}"


def _text(node: Node | None) -> str:
    return node.text.decode("utf-8", "replace") if node is not None and node.text else ""


def _unwrap(node: Node) -> Node:
    """The definition inside a ``decorated_definition``."""
    inner = node.child_by_field_name("definition") if node.type == "decorated_definition" else None
    return inner or node


def _find_class(root: Node, name: str) -> Node | None:
    for child in root.named_children:
        node = _unwrap(child)
        if node.type == "class_definition" and _text(node.child_by_field_name("name")) == name:
            return node
    return None


def class_names(code: str) -> list[str]:
    """Top-level class names defined in ``code``."""
    out = []
    for child in _tree(code).named_children:
        node = _unwrap(child)
        if node.type == "class_definition":
            out.append(_text(node.child_by_field_name("name")))
    return out


def _param(node: Node, kind: ParamKind) -> Param | None:
    t = node.type
    if t == "identifier":
        return Param(_text(node), kind)
    if t in {"default_parameter", "typed_default_parameter"}:
        return Param(_text(node.child_by_field_name("name")), kind, has_default=True)
    if t == "typed_parameter":
        inner = node.named_children[0] if node.named_children else None
        return _param(inner, kind) if inner is not None else None
    if t == "list_splat_pattern":
        return Param(_text(node.named_children[0]) if node.named_children else "", "var_positional")
    if t == "dictionary_splat_pattern":
        return Param(_text(node.named_children[0]) if node.named_children else "", "var_keyword")
    return None


def _params(function: Node) -> tuple[Param, ...]:
    params_node = function.child_by_field_name("parameters")
    out: list[Param] = []
    kind: ParamKind = "positional"
    for child in params_node.named_children if params_node is not None else []:
        if child.type == "positional_separator":
            out = [Param(p.name, "positional_only", p.has_default) for p in out]
        elif child.type == "keyword_separator":
            kind = "keyword_only"
        elif (p := _param(child, kind)) is not None:
            out.append(p)
            if p.kind == "var_positional":
                kind = "keyword_only"
    return tuple(out[1:]) if out and out[0].name in {"self", "cls"} else tuple(out)


def _method(cls: Node, name: str) -> tuple[Param, ...] | None:
    body = cls.child_by_field_name("body")
    for child in body.named_children if body is not None else []:
        node = _unwrap(child)
        if node.type == "function_definition" and _text(node.child_by_field_name("name")) == name:
            return _params(node)
    return None


def signature_of(source: str, class_name: str) -> Signature | None:
    """The ``__init__``/``forward`` signature of top-level ``class_name``; None if absent."""
    cls = _find_class(_tree(source), class_name)
    if cls is None:
        return None
    supers = cls.child_by_field_name("superclasses")
    bases = tuple(_text(b) for b in supers.named_children) if supers is not None else ()
    return Signature(init=_method(cls, "__init__"), forward=_method(cls, "forward"), bases=bases)


# --- signature check --------------------------------------------------------------------------


def _show(params: tuple[Param, ...]) -> str:
    def one(p: Param) -> str:
        star = {"var_positional": "*", "var_keyword": "**"}.get(p.kind, "")
        return f"{star}{p.name}{'=…' if p.has_default else ''}"

    return "(" + ", ".join(one(p) for p in params) + ")"


def _positional(params: tuple[Param, ...]) -> list[Param]:
    return [p for p in params if p.kind in {"positional", "positional_only"}]


def _check_method(
    name: str, cand: tuple[Param, ...], ref: tuple[Param, ...], strict_names: bool
) -> tuple[list[str], list[str]]:
    """Can ``cand`` be called as ``ref`` is (positionally, with ``ref``'s positional count)?"""
    errors: list[str] = []
    warnings: list[str] = []
    n = len(_positional(ref))
    positional = _positional(cand)
    required = [p for p in positional if not p.has_default]
    varargs = any(p.kind == "var_positional" for p in cand)
    kw_required = [p for p in cand if p.kind == "keyword_only" and not p.has_default]
    where = f"ModelNew.{name}{_show(cand)} does not match Model.{name}{_show(ref)}"
    if len(required) > n or (len(positional) < n and not varargs) or kw_required:
        errors.append(f"{where}: keep the parameters of Model.{name}")
        return errors, warnings
    if varargs and len(positional) < n:
        warnings.append(f"ModelNew.{name} takes *args instead of Model.{name}{_show(ref)}")
    names_differ = [p.name for p in positional[:n]] != [p.name for p in _positional(ref)]
    if names_differ and len(positional) >= n:
        (errors if strict_names else warnings).append(f"{where}: parameter names differ")
    elif len(positional) > n:
        warnings.append(f"ModelNew.{name} takes extra optional parameters: {_show(cand)}")
    return errors, warnings


def check_signature(
    cand: Signature, ref: Signature, *, strict_names: bool = False
) -> tuple[list[str], list[str]]:
    """Errors and warnings of ModelNew's signature against Model's."""
    errors: list[str] = []
    warnings: list[str] = []
    inherits = "Model" in cand.bases
    for name, c, r in (("__init__", cand.init, ref.init), ("forward", cand.forward, ref.forward)):
        if c is None and inherits:
            continue
        if c is None and name == "forward":
            errors.append("ModelNew defines no forward method")
            continue
        e, w = _check_method(name, c or (), r or (), strict_names)
        errors += e
        warnings += w
    return errors, warnings


# --- reply text -------------------------------------------------------------------------------


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
            if not syntax_error(kept) and _defines_model_new(kept):
                return kept, head + tail
    return code, 0


def _error_line(code: str) -> int | None:
    """The line CPython's parser stops at (1-based), or None when the code parses."""
    try:
        ast.parse(code)
    except SyntaxError as exc:
        return exc.lineno or 1
    except (ValueError, RecursionError, MemoryError):
        return 1
    return None


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


def _validate(code: str, reference: Signature | None, strict_names: bool) -> tuple[str, list[str]]:
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
    cand = signature_of(code, "ModelNew")
    assert cand is not None  # ModelNew is in class_names
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
    model_signature: Signature | None,
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
