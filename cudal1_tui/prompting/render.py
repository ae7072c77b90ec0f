"""Render the templates into chat messages: the contrastive prompt and the repair prompt."""

from __future__ import annotations

import re

from cudal1_evaluator.schema import SPEEDUP_BOUND_WORDS
from cudal1_tui.prompting.budget import estimate_tokens, fit_exemplars, truncate_code
from cudal1_tui.prompting.excerpt import clip_text
from cudal1_tui.prompting.exemplar_items import Exemplar, ExemplarCandidate
from cudal1_tui.prompting.templates import Templates, substitute
from cudal1_tui.records import Message

DEFAULT_BUDGET_TOKENS = 12000  # the whole prompt; leaves room for the reply in a 32k context
NO_EXEMPLARS = "None yet: this is the first attempt. Base your analysis on the reference code."
_ROLE_LABEL = {
    "best": "current best",
    "accepted": "accepted by the user",
    "contrast": "earlier variant",
    "failure": "recent failure",
    "builtin": "built-in strategy",
}


def fenced(text: str, lang: str = "") -> str:
    """A fenced block whose fence is longer than any backtick run inside ``text``."""
    runs = [len(m) for m in re.findall(r"`{3,}", text)]
    fence = "`" * max(3, max(runs, default=0) + 1)
    return f"{fence}{lang}\n{text.rstrip()}\n{fence}"


def format_speedup(speedup: float | None, bound: str = "") -> str:
    """``1.87x``; ``at least 1.87x`` where the measured speedup is a lower bound (the
    candidate's calls so short that the per-call hand-over stays in its time)."""
    return f"{SPEEDUP_BOUND_WORDS.get(bound, '')}{speedup:.2f}x" if speedup is not None else "n/a"


def format_reference(reference_ms: float | None) -> str:
    if reference_ms is None:
        return "not measured yet"
    return f"{reference_ms:.4g} ms per forward call (eager PyTorch)"


def _label(e: Exemplar) -> str:
    label = _ROLE_LABEL.get(e.role, e.role)
    if e.source.startswith("builtin:"):
        strategy = e.source.removeprefix("builtin:")
        if e.role == "builtin":
            return f"built-in strategy: {strategy}"
        label = f"{label}, built-in: {strategy}"
    return label


def _heading(number: int, e: Exemplar) -> str:
    if e.status == "ok":
        speedup = format_speedup(e.speedup, e.speedup_bound)
        return f"## Implementation {number}: speedup {speedup} ({_label(e)})"
    return f"## Implementation {number}: FAILED, status {e.status} ({_label(e)})"


def format_exemplar(number: int, e: Exemplar) -> str:
    parts = [_heading(number, e)]
    if e.dropped:
        parts.append("(code omitted to fit the prompt's token budget)")
    elif not e.code.strip():
        parts.append("(the reply held no usable code)")
    else:
        if e.truncated:
            parts.append("(code shortened to fit the prompt's token budget; the middle is omitted)")
        parts.append(fenced(e.code, "python"))
    if e.status != "ok":
        parts.append("Error:\n" + fenced(e.error or e.status))
    return "\n\n".join(parts)


def format_exemplars(exemplars: list[Exemplar]) -> str:
    if not exemplars:
        return NO_EXEMPLARS
    intro = (
        "Scores are measured speedups over the reference (higher is better; 1.00x is as fast "
        "as the reference)."
    )
    blocks = [format_exemplar(i, e) for i, e in enumerate(exemplars, start=1)]
    return "\n\n".join([intro, *blocks])


def _common(problem_source: str, device: str, reference_ms: float | None) -> dict[str, str]:
    return {
        "device": device or "unknown",
        "reference_timing": format_reference(reference_ms),
        "reference_code": fenced(problem_source, "python"),
    }


def render_contrastive(
    templates: Templates,
    problem_source: str,
    exemplars: list[Exemplar],
    *,
    device: str,
    reference_ms: float | None,
    budget_tokens: int = DEFAULT_BUDGET_TOKENS,
) -> list[Message]:
    """System and user messages; exemplar code is shortened or dropped to fit the budget."""
    values = _common(problem_source, device, reference_ms)
    system = substitute(templates.system, values)
    fixed = estimate_tokens(system) + estimate_tokens(
        substitute(templates.contrastive, {**values, "exemplars": ""})
    )
    fitted = fit_exemplars(exemplars, max(0, budget_tokens - fixed))
    user = substitute(templates.contrastive, {**values, "exemplars": format_exemplars(fitted)})
    return [Message("system", system), Message("user", user)]


def render_repair(
    templates: Templates,
    problem_source: str,
    failed: ExemplarCandidate,
    *,
    device: str,
    reference_ms: float | None,
    budget_tokens: int = DEFAULT_BUDGET_TOKENS,
) -> list[Message]:
    """System and user messages asking to fix ``failed`` given its error."""
    values = _common(problem_source, device, reference_ms)
    values["status"] = failed.status
    values["error"] = fenced(clip_text(failed.error, 3000) or failed.status)
    system = substitute(templates.system, values)
    fixed = estimate_tokens(system) + estimate_tokens(
        substitute(templates.repair, {**values, "candidate_code": ""})
    )
    code, omitted = truncate_code(failed.code, max(400, budget_tokens - fixed))
    shown = fenced(code, "python") if code.strip() else "(the reply held no usable code)"
    if omitted:
        shown = f"(code shortened to fit the prompt's token budget; {omitted} lines omitted)\n\n"
        shown += fenced(code, "python")
    values["candidate_code"] = shown
    user = substitute(templates.repair, values)
    return [Message("system", system), Message("user", user)]
