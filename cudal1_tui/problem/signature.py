"""Read function and class signatures from tree-sitter nodes (the reply's and the problem's)."""

from __future__ import annotations

from tree_sitter import Node

from cudal1_tui.analysis import source_tree as ts
from cudal1_tui.problem.model import POSITIONAL_KINDS, ClassSignature, Param, ParamKind, Signature

_SPLATS: dict[str, ParamKind] = {
    "list_splat_pattern": "var_positional",
    "dictionary_splat_pattern": "var_keyword",
}


def _param(node: Node, keyword_only: bool) -> Param | None:
    kind: ParamKind = "keyword_only" if keyword_only else "positional"
    if node.type == "identifier":
        return Param(ts.text(node), kind=kind)
    if node.type in _SPLATS:
        return Param(ts.text(node.named_children[0]) if node.named_children else "",
                     kind=_SPLATS[node.type])
    if node.type == "typed_parameter":
        inner = node.named_children[0]
        annotation = ts.text(node.child_by_field_name("type"))
        if inner.type in _SPLATS:
            return Param(ts.text(inner.named_children[0]), kind=_SPLATS[inner.type],
                         annotation=annotation)
        return Param(ts.text(inner), kind=kind, annotation=annotation)
    if node.type in ("default_parameter", "typed_default_parameter"):
        type_node = node.child_by_field_name("type")
        return Param(
            ts.text(node.child_by_field_name("name")),
            default=ts.text(node.child_by_field_name("value")),
            kind=kind,
            annotation=ts.text(type_node) if type_node is not None else None,
        )
    return None  # error nodes


def _positional_only(params: list[Param]) -> list[Param]:
    return [Param(p.name, p.default, "positional_only", p.annotation) for p in params]


def signature(function: Node, *, method: bool) -> Signature:
    """Parameters of a ``function_definition``; drops the first one (self) of a method."""
    params: list[Param] = []
    keyword_only = False
    node = function.child_by_field_name("parameters")
    for child in node.named_children if node is not None else []:
        if child.type == "positional_separator":
            params = _positional_only(params)
            continue
        if child.type == "keyword_separator":
            keyword_only = True
            continue
        param = _param(child, keyword_only)
        if param is None:
            continue
        if param.kind == "var_positional":
            keyword_only = True
        params.append(param)
    if method and params and params[0].kind in POSITIONAL_KINDS:
        params = params[1:]
    return Signature(params=params, line=ts.position(function)[0])


def class_signature(cls: Node) -> ClassSignature:
    """``__init__``/``forward`` of a ``class_definition`` as its body defines them, and bases."""
    body = cls.child_by_field_name("body")
    methods = ts.definitions(body, "function_definition") if body is not None else {}
    supers = cls.child_by_field_name("superclasses")
    bases = tuple(ts.text(b) for b in supers.named_children) if supers is not None else ()
    init, forward = methods.get("__init__"), methods.get("forward")
    return ClassSignature(
        init=signature(init, method=True) if init is not None else None,
        forward=signature(forward, method=True) if forward is not None else None,
        bases=bases,
    )


def class_signature_of(source: str, class_name: str) -> ClassSignature | None:
    """The signature of top-level ``class_name`` in ``source``; None when it is not defined."""
    cls = ts.definitions(ts.parse_python(source).root_node, "class_definition").get(class_name)
    return class_signature(cls) if cls is not None else None
