"""A parsed Python module with its import aliases, so names resolve to what they really are.

``import torch.nn.functional as F`` makes ``F.relu`` resolve to ``torch.nn.functional.relu``;
``from threading import Thread as T`` makes ``T`` resolve to ``threading.Thread``; a simple alias
assignment (``S = torch.cuda.Stream``) is followed too.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass, field

from tree_sitter import Node

from cudal1_tui.analysis import source_tree as ts

_BUILTINS = frozenset(dir(builtins))

_IMPORTS = """
(import_statement) @imp
(import_from_statement) @imp
"""


@dataclass(frozen=True)
class Import:
    module: str  # the imported module (``a.b`` in ``import a.b`` / ``from a.b import c``)
    line: int


@dataclass
class PyModule:
    source: str
    root: Node
    aliases: dict[str, str] = field(default_factory=dict)
    imports: list[Import] = field(default_factory=list)

    def resolve(self, node: Node) -> str | None:
        """The canonical dotted name of an identifier/attribute chain, or None."""
        name = ts.dotted_name(node)
        if name is None:
            return self._resolve_getattr(node)
        return self.canonical(name)

    def resolve_imported(self, node: Node) -> str | None:
        """Like ``resolve``, but only for names rooted in an import or a builtin (a local
        variable called ``signal`` or ``socket`` is not the module)."""
        if node.type == "call":
            args = _arguments(node)
            return self.resolve(node) if args and self.resolve_imported(args[0]) else None
        name = ts.dotted_name(node)
        if name is None:
            return None
        head = name.split(".")[0]
        return self.canonical(name) if head in self.aliases or head in _BUILTINS else None

    def canonical(self, name: str) -> str:
        head, _, rest = name.partition(".")
        if head in self.aliases:
            base = self.aliases[head]
        elif head in _BUILTINS:
            base = f"builtins.{head}"
        else:
            base = head
        return f"{base}.{rest}" if rest else base

    def _resolve_getattr(self, node: Node) -> str | None:
        """``getattr(sys, "_getframe")`` reads as ``sys._getframe``."""
        if node.type != "call":
            return None
        func = node.child_by_field_name("function")
        if func is None or ts.dotted_name(func) not in ("getattr",):
            return None
        args = _arguments(node)
        if len(args) < 2:
            return None
        base = self.resolve(args[0])
        attr = ts.string_value(args[1])
        return f"{base}.{attr}" if base is not None and attr else None

    def top_level(self) -> list[Node]:
        """Statements at module level (decorated definitions unwrapped)."""
        return ts.top_level(self.root)

    def classes(self) -> dict[str, Node]:
        return ts.definitions(self.root, "class_definition")

    def functions(self) -> dict[str, Node]:
        return ts.definitions(self.root, "function_definition")

    def assignments(self) -> dict[str, Node]:
        """Module-level ``NAME = value``: the value node of the last assignment to NAME."""
        found: dict[str, Node] = {}
        for stmt in self.top_level():
            if stmt.type != "expression_statement" or not stmt.named_children:
                continue
            assign = stmt.named_children[0]
            left = assign.child_by_field_name("left")
            right = assign.child_by_field_name("right")
            if assign.type == "assignment" and left is not None and right is not None \
                    and left.type == "identifier":
                found[ts.text(left)] = right
        return found


def _arguments(call: Node) -> list[Node]:
    args = call.child_by_field_name("arguments")
    if args is None:
        return []
    return [a for a in args.named_children if a.type not in ("comment", "keyword_argument")]


def call_arguments(call: Node) -> tuple[list[Node], dict[str, Node]]:
    """Positional argument nodes and keyword argument values of a call."""
    args = call.child_by_field_name("arguments")
    positional: list[Node] = []
    keywords: dict[str, Node] = {}
    for a in args.named_children if args is not None else []:
        if a.type == "keyword_argument":
            name, value = a.child_by_field_name("name"), a.child_by_field_name("value")
            if name is not None and value is not None:
                keywords[ts.text(name)] = value
        elif a.type != "comment":
            positional.append(a)
    return positional, keywords


def load(source: str) -> PyModule:
    tree = ts.parse_python(source)
    module = PyModule(source=source, root=tree.root_node)
    caps = ts.captures("python", _IMPORTS, tree.root_node)
    for stmt in caps.get("imp", []):
        _record_import(module, stmt)
    _record_aliases(module)
    return module


def _record_import(module: PyModule, stmt: Node) -> None:
    line = ts.line(stmt)
    if stmt.type == "import_statement":
        for item in stmt.named_children:
            if item.type == "dotted_name":
                name = ts.text(item)
                module.imports.append(Import(name, line))
                head = name.split(".")[0]
                module.aliases.setdefault(head, head)
            elif item.type == "aliased_import":
                target = ts.text(item.child_by_field_name("name"))
                alias = ts.text(item.child_by_field_name("alias"))
                module.imports.append(Import(target, line))
                module.aliases[alias] = target
        return
    source_node = stmt.child_by_field_name("module_name")
    base = ts.text(source_node)
    if base.startswith("."):
        return  # relative import: nothing of the harness or stdlib
    module.imports.append(Import(base, line))
    for item in stmt.children_by_field_name("name"):
        if item.type == "dotted_name":
            name = ts.text(item)
            module.aliases[name] = f"{base}.{name}"
            module.imports.append(Import(f"{base}.{name}", line))
        elif item.type == "aliased_import":
            target = ts.text(item.child_by_field_name("name"))
            alias = ts.text(item.child_by_field_name("alias"))
            module.aliases[alias] = f"{base}.{target}"
            module.imports.append(Import(f"{base}.{target}", line))


_ALIAS_ASSIGN = "(assignment left: (identifier) @name right: [(attribute) (identifier)] @value)"


def _record_aliases(module: PyModule) -> None:
    """``S = torch.cuda.Stream`` makes ``S`` an alias (only for names that resolve to imports)."""
    for match in ts.matches("python", _ALIAS_ASSIGN, module.root):
        name, value = match["name"][0], match["value"][0]
        dotted = ts.dotted_name(value)
        if dotted is None:
            continue
        head = dotted.split(".")[0]
        if head in module.aliases and ts.text(name) not in module.aliases:
            module.aliases[ts.text(name)] = module.canonical(dotted)
