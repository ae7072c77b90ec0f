"""Source surgery the built-in strategies share: copy the reference, rename, re-sign.

A built-in candidate carries the reference module's code (its classes, helpers and
size constants) minus the harness-owned parts (``get_inputs``, ``get_init_inputs``,
a ``__main__`` block), so it is self-contained and never imports the problem file.
"""

from __future__ import annotations

import textwrap

from tree_sitter import Node

from cudal1_tui.analysis.source_tree import parse_python, text
from cudal1_tui.problem.model import Param, Signature

CLONE_OUTPUTS = '''
def _clone_outputs(out):
    if isinstance(out, torch.Tensor):
        return out.clone()
    if isinstance(out, (tuple, list)):
        return type(out)(_clone_outputs(o) for o in out)
    return out
'''
HARNESS_FUNCTIONS = frozenset({"get_inputs", "get_init_inputs"})
REFERENCE_CLASS = "Model"
REF_INIT = "_reference_init"
REF_FORWARD = "_reference_forward"


def _walk(node: Node) -> list[Node]:
    out: list[Node] = []
    stack = [node]
    while stack:
        current = stack.pop()
        out.append(current)
        stack.extend(reversed(current.children))
    return out


def _is_attribute_name(node: Node) -> bool:
    """``obj.Model``: the ``Model`` there is an attribute, not the class."""
    parent = node.parent
    return parent is not None and parent.type == "attribute" and (
        parent.child_by_field_name("attribute") == node
    )


def _splice(source: bytes, edits: list[tuple[int, int, str]]) -> str:
    """Apply non-overlapping (start_byte, end_byte, replacement) edits."""
    out = source
    for start, end, new in sorted(edits, key=lambda e: e[0], reverse=True):
        out = out[:start] + new.encode("utf-8") + out[end:]
    return out.decode("utf-8")


def _harness_ranges(root: Node) -> list[tuple[int, int, str]]:
    edits: list[tuple[int, int, str]] = []
    for child in root.named_children:
        target = child
        if child.type == "decorated_definition":
            target = child.child_by_field_name("definition") or child
        name = text(target.child_by_field_name("name"))
        harness = target.type == "function_definition" and name in HARNESS_FUNCTIONS
        main_block = child.type == "if_statement" and "__main__" in text(
            child.child_by_field_name("condition"))
        if harness or main_block:
            edits.append((child.start_byte, child.end_byte, ""))
    return edits


def rename_class(source: str, new_name: str, *, extra: list[tuple[int, int, str]] | None = None,
                 strip_harness: bool = True) -> str:
    """The module with every reference to ``Model`` renamed; harness functions removed.

    ``extra`` edits (byte ranges of the original source) are applied in the same pass;
    they must not overlap a renamed identifier.
    """
    data = source.encode("utf-8")
    root = parse_python(source).root_node
    edits = list(extra or [])
    if strip_harness:
        edits += _harness_ranges(root)
    taken = [(s, e) for s, e, _ in edits]
    for node in _walk(root):
        if node.type != "identifier" or text(node) != REFERENCE_CLASS:
            continue
        if _is_attribute_name(node):
            continue
        if any(s <= node.start_byte and node.end_byte <= e for s, e in taken):
            continue
        edits.append((node.start_byte, node.end_byte, new_name))
    return _tidy(_splice(data, edits))


def _tidy(source: str) -> str:
    """Collapse the blank runs that removed definitions leave behind."""
    lines = source.rstrip().splitlines()
    out: list[str] = []
    blank = 0
    for line in lines:
        blank = blank + 1 if not line.strip() else 0
        if blank <= 2:
            out.append(line.rstrip())
    return "\n".join(out) + "\n"


def render_params(signature: Signature) -> str:
    """``self, a: int, b=3, *args, k=1, **kw`` — the parameter list with ``self``."""
    parts = ["self"]
    star_seen = False
    for p in signature.params:
        if p.kind == "keyword_only" and not star_seen:
            parts.append("*")
            star_seen = True
        if p.kind == "var_positional":
            star_seen = True
        parts.append(_render_param(p))
    return ", ".join(parts)


def _render_param(p: Param) -> str:
    prefix = {"var_positional": "*", "var_keyword": "**"}.get(p.kind, "")
    out = prefix + p.name
    if p.annotation:
        out += f": {p.annotation}"
    if p.default is not None:
        out += f" = {p.default}" if p.annotation else f"={p.default}"
    return out


def render_call_args(signature: Signature) -> str:
    """The arguments that pass every parameter straight through."""
    parts = []
    for p in signature.params:
        if p.kind == "var_positional":
            parts.append(f"*{p.name}")
        elif p.kind == "var_keyword":
            parts.append(f"**{p.name}")
        elif p.kind == "keyword_only":
            parts.append(f"{p.name}={p.name}")
        else:
            parts.append(p.name)
    return ", ".join(parts)


def is_simple(signature: Signature) -> bool:
    """Only plain positional parameters (no ``*args``, ``**kw`` or keyword-only)."""
    return all(p.kind in ("positional", "positional_only") for p in signature.params)


def _model_class(root: Node) -> Node | None:
    for child in root.named_children:
        target = child.child_by_field_name("definition") if child.type == "decorated_definition" \
            else child
        if target is not None and target.type == "class_definition" and \
                text(target.child_by_field_name("name")) == REFERENCE_CLASS:
            return target
    return None


def _renamed_methods(body: Node) -> tuple[list[tuple[int, int, str]], bool]:
    """Edits renaming Model's ``__init__``/``forward``; whether it defines ``__init__``."""
    edits: list[tuple[int, int, str]] = []
    new_names = {"__init__": REF_INIT, "forward": REF_FORWARD}
    for child in body.named_children:
        target = child.child_by_field_name("definition") if child.type == "decorated_definition" \
            else child
        name = target.child_by_field_name("name") if target is not None else None
        if target is None or target.type != "function_definition" or name is None:
            continue
        if text(name) in new_names:
            edits.append((name.start_byte, name.end_byte, new_names[text(name)]))
    has_init = any(new == REF_INIT for _, _, new in edits)
    return edits, has_init


DEFAULT_INIT = f"""
def {REF_INIT}(self):
    super().__init__()
"""


def wrap_reference(problem_source: str, header: str, helpers: str, methods: str) -> str:
    """The reference module turned into a ``ModelNew`` that does more than the reference.

    ``class Model`` becomes ``class ModelNew(nn.Module)``; its ``__init__`` and ``forward``
    are kept as ``_reference_init`` and ``_reference_forward`` (so parameter names match
    the reference's state_dict), and ``methods`` (written at 4-space indentation, defining
    the new ``__init__`` and ``forward``) are appended to the class. ``helpers`` go at
    module level. ``ModelNew`` does not derive from the reference: the evaluator rejects
    that as running the reference instead of the candidate's own code.
    """
    root = parse_python(problem_source).root_node
    cls = _model_class(root)
    body = cls.child_by_field_name("body") if cls is not None else None
    if cls is None or body is None or not body.named_children:
        raise ValueError("the problem has no class Model to wrap")
    edits, has_init = _renamed_methods(body)
    indent = " " * body.named_children[0].start_point[1]
    added = methods.strip("\n") + ("" if has_init else "\n\n" + DEFAULT_INIT.strip("\n"))
    added = textwrap.indent(textwrap.dedent(added), indent)
    edits.append((cls.end_byte, cls.end_byte, "\n\n" + added))
    module = rename_class(problem_source, "ModelNew", extra=edits)
    parts = [f"# {header}\n" + module.rstrip()]
    if "import torch" not in module.splitlines():
        parts.append("import torch  # noqa: E402 - used by the methods above")
    if helpers.strip():
        parts.append(helpers.strip("\n"))
    return "\n\n\n".join(parts) + "\n"
