"""What the static gate reports: one finding per suspicious construct, with its reason."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from cudal1_evaluator.schema import Flag

GateSeverity = Literal["reject", "warn", "info"]


@dataclass(frozen=True)
class Finding:
    """A static-gate finding. ``reject`` findings stop the candidate before it runs; ``info``
    notes say what the gate saw and ignored."""

    code: str
    reason: str
    severity: GateSeverity
    line: int

    def to_flag(self) -> Flag:
        where = f"line {self.line}: " if self.line > 0 else ""
        return Flag(code=f"static.{self.code}", reason=f"{where}{self.reason}",
                    severity=self.severity)


def dedupe(findings: list[Finding]) -> list[Finding]:
    """One finding per (code, line), rejects first, then by line."""
    seen: dict[tuple[str, int], Finding] = {}
    for f in findings:
        key = (f.code, f.line)
        if key not in seen or (f.severity == "reject" and seen[key].severity == "warn"):
            seen[key] = f
    return sorted(seen.values(), key=lambda f: (f.severity != "reject", f.line, f.code))
