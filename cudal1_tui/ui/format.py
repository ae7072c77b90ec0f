"""Turn records and results into the short strings the screen shows."""

from __future__ import annotations

from cudal1_evaluator.schema import ProbeResult, Result
from cudal1_tui.present.verdict_text import LOG_COMPILE_TAIL_LINES, record_details
from cudal1_tui.records import CandidateRecord
from cudal1_tui.uncertainty import BOUND_MARK

STATUS_STYLE: dict[str, str] = {
    "ok": "green",
    "incorrect": "yellow",
    "compile_error": "red",
    "runtime_error": "red",
    "timeout": "magenta",
    "rejected": "bold red",
    "cancelled": "dim",
}
CANCELLED_FLAG = "cancelled"  # a slot the user stopped (esc): no verdict on its code


def status_text(status: str, flag_codes: list[str] | tuple[str, ...]) -> str:
    """The status as the screen names it: a slot the user stopped is ``cancelled``, not
    ``rejected`` (the trace keeps the evaluator's status and the flag)."""
    return "cancelled" if CANCELLED_FLAG in flag_codes else status


def record_status(record: CandidateRecord) -> str:
    return status_text(record.status, record.flag_codes(include_info=True))


def speedup_text(speedup: float | None, bound: str = "") -> str:
    """``1.87×``; ``≥1.87×`` where the speedup is a lower bound (``Result.speedup_bound``)."""
    return "—" if speedup is None else f"{BOUND_MARK.get(bound, '')}{speedup:.2f}×"


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


def max_error(result: Result) -> float | None:
    errors = [float(t.max_abs_err) for t in result.trials]
    return max(errors) if errors else None


def error_text(value: float | None) -> str:
    return "—" if value is None else f"{value:.1e}"


def flags_text(codes: list[str] | tuple[str, ...]) -> str:
    return ", ".join(codes) if codes else ""


def record_flags(record: CandidateRecord) -> list[str]:
    """Integrity and static-gate findings, each once: what makes an accept need confirming."""
    return record.flag_codes(include_info=False)


def device_text(device: str, probe: ProbeResult | None) -> str:
    """``cuda:0 (NVIDIA H100 80GB HBM3)`` when the probe named the GPU, else the device."""
    name = probe.device.get("name") if probe is not None else None
    return f"{device} ({name})" if name else device


def tokens_rate_text(tokens: int, per_s: float) -> str:
    return f"{tokens} tokens · {per_s:.0f} tok/s" if per_s else f"{tokens} tokens"


def failure_lines(record: CandidateRecord) -> list[str]:
    """What the Logs tab says about a failed or flagged record; [] for a clean verified one."""
    if record.status == "ok" and not record_flags(record):
        return []
    details = record_details(record, LOG_COMPILE_TAIL_LINES).plain
    return [f"── {record.round}.{record.slot} {record.source}: {record_status(record)}",
            *([details] if details else [])]
