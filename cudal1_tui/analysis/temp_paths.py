"""Which expressions name a path inside a temp dir the candidate made for itself.

Real kernels often write their CUDA source into ``tempfile.mkdtemp()`` (or a
``NamedTemporaryFile``) and build it with ``torch.utils.cpp_extension.load``. Such writes are
fine: the evaluator gives every child a private temp dir and its guard refuses writes anywhere
else. A name is temp-derived when it is bound (assignment, ``with ... as``) to an expression
that calls ``tempfile.*`` or uses another temp-derived name (``os.path.join(tmp, "k.cu")``,
``Path(tmp) / "k.cu"``, ``self.build_dir``).
"""

from __future__ import annotations

from collections.abc import Iterator

from tree_sitter import Node

from cudal1_tui.analysis import source_tree as ts
from cudal1_tui.analysis.pymodule import PyModule


def temp_names(mod: PyModule) -> set[str]:
    """Names and ``obj.attr`` chains holding temp-derived paths (to a fixed point)."""
    bindings = list(_bindings(mod.root))
    names: set[str] = set()
    changed = True
    while changed:
        changed = False
        for target, value in bindings:
            if target not in names and mentions_temp(mod, value, names):
                names.add(target)
                changed = True
    return names


def mentions_temp(mod: PyModule, node: Node | None, names: set[str]) -> bool:
    """``node`` calls ``tempfile.*`` or uses a temp-derived name."""
    if node is None:
        return False
    for sub in ts.walk(node):
        if sub.type == "call":
            func = sub.child_by_field_name("function")
            name = mod.resolve(func) if func is not None else None
            if name is not None and name.startswith("tempfile."):
                return True
        elif sub.type in ("identifier", "attribute") and ts.text(sub) in names:
            return True
    return False


def _bindings(root: Node) -> Iterator[tuple[str, Node]]:
    for node in ts.walk(root):
        if node.type == "assignment":
            left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
            if left is not None and right is not None and \
                    left.type in ("identifier", "attribute"):
                yield ts.text(left), right
        elif node.type == "as_pattern" and node.named_children:
            target = next((c for c in node.named_children if c.type == "as_pattern_target"),
                          None)
            if target is not None:
                yield ts.text(target).strip(), node.named_children[0]
