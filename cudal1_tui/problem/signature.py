"""Read a function's parameters from its tree-sitter node."""

from __future__ import annotations

from tree_sitter import Node

from cudal1_tui.problem.model import Param, ParamKind, Signature
from cudal1_tui.problem.syntax import position, text

_SPLATS: dict[str, ParamKind] = {
    "list_splat_pattern": "var_positional",
    "dictionary_splat_pattern": "var_keyword",
}


def _param(node: Node, keyword_only: bool) -> Param | None:
    kind: ParamKind = "keyword_only" if keyword_only else "positional"
    if node.type == "identifier":
        return Param(text(node), kind=kind)
    if node.type in _SPLATS:
        return Param(text(node.named_children[0]), kind=_SPLATS[node.type])
    if node.type == "typed_parameter":
        inner = node.named_children[0]
        annotation = text(node.child_by_field_name("type"))
        if inner.type in _SPLATS:
            return Param(text(inner.named_children[0]), kind=_SPLATS[inner.type],
                         annotation=annotation)
        return Param(text(inner), kind=kind, annotation=annotation)
    if node.type in ("default_parameter", "typed_default_parameter"):
        type_node = node.child_by_field_name("type")
        return Param(
            text(node.child_by_field_name("name")),
            default=text(node.child_by_field_name("value")),
            kind=kind,
            annotation=text(type_node) if type_node is not None else None,
        )
    return None  # separators ("/") and error nodes


def signature(function: Node, *, method: bool) -> Signature:
    """Parameters of a ``function_definition``; drops the first one (self) of a method."""
    params: list[Param] = []
    keyword_only = False
    node = function.child_by_field_name("parameters")
    for child in node.named_children if node is not None else []:
        if child.type == "keyword_separator":
            keyword_only = True
            continue
        param = _param(child, keyword_only)
        if param is None:
            continue
        if param.kind == "var_positional":
            keyword_only = True
        params.append(param)
    if method and params and params[0].kind == "positional":
        params = params[1:]
    return Signature(params=params, line=position(function)[0])
