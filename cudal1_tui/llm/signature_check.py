"""Can ModelNew be called as Model is? Its ``__init__``/``forward`` checked against Model's."""

from __future__ import annotations

from cudal1_tui.problem.model import POSITIONAL_KINDS, ClassSignature, Param


def _show(params: list[Param]) -> str:
    def one(p: Param) -> str:
        star = {"var_positional": "*", "var_keyword": "**"}.get(p.kind, "")
        return f"{star}{p.name}{'=…' if p.has_default else ''}"

    return "(" + ", ".join(one(p) for p in params) + ")"


def _positional(params: list[Param]) -> list[Param]:
    return [p for p in params if p.kind in POSITIONAL_KINDS]


def _check_method(
    name: str, cand: list[Param], ref: list[Param], strict_names: bool
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
    cand: ClassSignature, ref: ClassSignature, *, strict_names: bool = False
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
        e, w = _check_method(name, c.params if c else [], r.params if r else [], strict_names)
        errors += e
        warnings += w
    return errors, warnings
