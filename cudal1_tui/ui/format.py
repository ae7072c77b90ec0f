"""Turn records and results into the short strings the screen shows."""

from __future__ import annotations

from typing import Any

from cudal1_evaluator.schema import ProbeResult
from cudal1_tui.store.records import CandidateRecord

STATUS_STYLE: dict[str, str] = {
    "ok": "green",
    "incorrect": "yellow",
    "compile_error": "red",
    "runtime_error": "red",
    "timeout": "magenta",
    "rejected": "bold red",
}


def speedup_text(speedup: float | None) -> str:
    return "—" if speedup is None else f"{speedup:.2f}×"


def ms_text(ms: float | None) -> str:
    if ms is None:
        return "—"
    return f"{ms * 1000:.1f} µs" if ms < 1 else f"{ms:.2f} ms"


BUILTIN_MARK = "⚙ "  # the help screen explains it; the detail pane shows the full name
_SHORTER = (("torch-compile-", "compile "), ("max-autotune-no-cudagraphs", "autotune-no-cg"))


def source_text(source: str) -> str:
    """A candidate's source, short enough for the table: ``model``, or a built-in strategy
    marked with a gear and abbreviated (``⚙ compile autotune-no-cg``)."""
    if not source.startswith("builtin:"):
        return source
    name = source.removeprefix("builtin:")
    for long, short in _SHORTER:
        name = name.replace(long, short)
    return BUILTIN_MARK + name


def max_error(result: dict[str, Any]) -> float | None:
    errors = [float(t.get("max_abs_err", 0.0)) for t in result.get("trials", []) or []]
    return max(errors) if errors else None


def error_text(value: float | None) -> str:
    return "—" if value is None else f"{value:.1e}"


def flag_codes(result: dict[str, Any]) -> list[str]:
    """Integrity findings (reject and warn); ``info`` notes such as a reused pristine
    reference or a speedup inside the noise are measurement remarks, not findings."""
    return [str(f.get("code", "?")) for f in result.get("flags", []) or []
            if f.get("severity") != "info"]


def flags_text(codes: list[str] | tuple[str, ...]) -> str:
    return ", ".join(codes) if codes else ""


def record_flags(record: CandidateRecord) -> list[str]:
    """Integrity findings plus static-gate findings: what makes an accept need confirming."""
    gate = [str(g.get("code", g.get("rule", "gate"))) for g in record.gate_findings]
    return flag_codes(record.result) + gate


def device_text(device: str, probe: ProbeResult | None) -> str:
    """``cuda:0 (NVIDIA H100 80GB HBM3)`` when the probe named the GPU, else the device."""
    name = probe.device.get("name") if probe is not None else None
    return f"{device} ({name})" if name else device


def tokens_rate_text(tokens: int, per_s: float) -> str:
    return f"{tokens} tokens · {per_s:.0f} tok/s" if per_s else f"{tokens} tokens"
