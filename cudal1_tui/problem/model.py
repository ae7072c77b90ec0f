"""What static inspection learns about a problem file (plain dataclasses, JSON-friendly)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, TypedDict

from cudal1_tui.problem.contract import CONTRACT

IssueSeverity = Literal["error", "warning"]
ParamKind = Literal[
    "positional", "positional_only", "keyword_only", "var_positional", "var_keyword"
]
POSITIONAL_KINDS: tuple[ParamKind, ...] = ("positional", "positional_only")


@dataclass
class Issue:
    """One thing wrong (or dubious) in the file; line and col are 1-based, 0 when global."""

    message: str
    line: int = 0
    col: int = 0
    severity: IssueSeverity = "error"

    def render(self, path: str) -> str:
        where = f"{path}:{self.line}:{self.col}" if self.line else path
        return f"{where}: {self.severity}: {self.message}"


@dataclass(frozen=True)
class Param:
    name: str
    default: str | None = None  # source text of the default, None when required
    kind: ParamKind = "positional"
    annotation: str | None = None

    @property
    def has_default(self) -> bool:
        return self.default is not None


@dataclass
class Signature:
    """A function's parameters (a method's without ``self``): the one signature type."""

    params: list[Param] = field(default_factory=list)
    line: int = field(default=0, compare=False)

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.params]

    def positional(self) -> list[Param]:
        return [p for p in self.params if p.kind in POSITIONAL_KINDS]

    def takes_varargs(self) -> bool:
        return any(p.kind == "var_positional" for p in self.params)

    def render(self) -> str:
        parts = []
        for p in self.params:
            prefix = {"var_positional": "*", "var_keyword": "**"}.get(p.kind, "")
            parts.append(prefix + p.name + (f"={p.default}" if p.default is not None else ""))
        return "(" + ", ".join(parts) + ")"


@dataclass(frozen=True)
class ClassSignature:
    """A class's ``__init__`` and ``forward`` as its body defines them (None: inherited)."""

    init: Signature | None
    forward: Signature | None
    bases: tuple[str, ...] = ()


@dataclass
class SizeConstant:
    """A module-level ``NAME = <int or float literal>``; byte offsets locate the literal."""

    name: str
    value: int | float
    line: int
    start_byte: int
    end_byte: int


@dataclass
class Inspection:
    path: str
    problems: list[Issue] = field(default_factory=list)
    forward: Signature | None = None
    init: Signature | None = None
    sizes: list[SizeConstant] = field(default_factory=list)
    imports: list[str] = field(default_factory=list)
    docstring: str = ""

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def errors(self) -> list[Issue]:
        return [p for p in self.problems if p.severity == "error"]

    @property
    def warnings(self) -> list[Issue]:
        return [p for p in self.problems if p.severity == "warning"]

    def size_values(self) -> dict[str, int | float]:
        return {s.name: s.value for s in self.sizes}

    def report(self) -> str:
        """All findings in one message; the expected contract follows when anything is wrong."""
        if not self.problems:
            return f"{self.path}: ok"
        lines = [p.render(self.path) for p in self.problems]
        if self.errors:
            lines += ["", CONTRACT]
        return "\n".join(lines)

    def to_dict(self) -> InspectionJson:
        """The JSON of ``cudal1-tui inspect --json`` (the dataclass fields, plus ``ok``)."""
        return {
            "path": self.path,
            "problems": [_issue_json(i) for i in self.problems],
            "forward": _signature_json(self.forward),
            "init": _signature_json(self.init),
            "sizes": [_size_json(c) for c in self.sizes],
            "imports": list(self.imports),
            "docstring": self.docstring,
            "ok": self.ok,
        }


class IssueJson(TypedDict):
    message: str
    line: int
    col: int
    severity: IssueSeverity


class ParamJson(TypedDict):
    name: str
    default: str | None
    kind: ParamKind
    annotation: str | None


class SignatureJson(TypedDict):
    params: list[ParamJson]
    line: int


class SizeConstantJson(TypedDict):
    name: str
    value: int | float
    line: int
    start_byte: int
    end_byte: int


class InspectionJson(TypedDict):
    path: str
    problems: list[IssueJson]
    forward: SignatureJson | None
    init: SignatureJson | None
    sizes: list[SizeConstantJson]
    imports: list[str]
    docstring: str
    ok: bool


def _issue_json(issue: Issue) -> IssueJson:
    return {"message": issue.message, "line": issue.line, "col": issue.col,
            "severity": issue.severity}


def _signature_json(signature: Signature | None) -> SignatureJson | None:
    if signature is None:
        return None
    params: list[ParamJson] = [
        {"name": p.name, "default": p.default, "kind": p.kind, "annotation": p.annotation}
        for p in signature.params
    ]
    return {"params": params, "line": signature.line}


def _size_json(size: SizeConstant) -> SizeConstantJson:
    return {"name": size.name, "value": size.value, "line": size.line,
            "start_byte": size.start_byte, "end_byte": size.end_byte}
