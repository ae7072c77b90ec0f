"""Turn records and results into the short strings the screen shows."""

from __future__ import annotations

from typing import Any

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


def device_text(device: str, details: dict[str, Any]) -> str:
    """``cuda:0 (NVIDIA H100 80GB HBM3)`` when the probe named the GPU, else the device."""
    info = details.get("device")
    name = info.get("name") if isinstance(info, dict) else None
    return f"{device} ({name})" if name else device


def tokens_rate_text(tokens: int, per_s: float) -> str:
    return f"{tokens} tokens · {per_s:.0f} tok/s" if per_s else f"{tokens} tokens"


def failure_lines(record: CandidateRecord) -> list[str]:
    """What the Logs tab says about a failed or flagged record; [] for a clean verified one."""
    if record.status == "ok" and not record_flags(record):
        return []
    result = record.result
    lines = [f"── {record.round}.{record.slot} {record.source}: {record.status}"]
    lines += [line for line in (record.parse_error, str(result.get("message", ""))) if line]
    lines += [f"integrity {flag.get('code')}: {flag.get('reason')}"
              for flag in result.get("flags", []) or []]
    lines += [f"static gate: {finding}" for finding in record.gate_findings]
    compile_log = str(result.get("compile_log", "")).strip()
    if compile_log and record.status == "compile_error":
        lines.append(compile_log[-4000:])
    return lines
