"""Token budget: estimate prompt size, shorten or drop exemplar code to fit.

Tokens are estimated without a tokenizer (about four characters a token, which
slightly overestimates prose and is close for code). Exemplars keep their score
even when their code is dropped, so the model still sees what was tried.
"""

from __future__ import annotations

from dataclasses import replace

from cudal1_tui.prompting.exemplar_items import Exemplar

CHARS_PER_TOKEN = 4
HEADER_TOKENS = 40  # heading, score line and fences of one exemplar
MIN_CODE_TOKENS = 150  # shorter than this, a truncated exemplar says too little to keep
_ROLE_RANK = {"best": 0, "accepted": 1, "contrast": 2, "builtin": 3, "failure": 4}


def estimate_tokens(text: str) -> int:
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def omitted_note(lines: int) -> str:
    return f"# … {lines} lines omitted …"


def truncate_code(code: str, max_tokens: int) -> tuple[str, int]:
    """Keep whole lines from the head (2/3) and tail (1/3); return the text and lines omitted."""
    if estimate_tokens(code) <= max_tokens:
        return code, 0
    lines = code.splitlines()
    budget = max(0, max_tokens * CHARS_PER_TOKEN - len(omitted_note(len(lines))) - 1)
    head: list[str] = []
    used = 0
    for line in lines:
        if used + len(line) + 1 > budget * 2 // 3:
            break
        head.append(line)
        used += len(line) + 1
    tail: list[str] = []
    for line in reversed(lines[len(head) :]):
        if used + len(line) + 1 > budget:
            break
        tail.insert(0, line)
        used += len(line) + 1
    omitted = len(lines) - len(head) - len(tail)
    return "\n".join([*head, omitted_note(omitted), *tail]), omitted


def exemplar_tokens(exemplar: Exemplar) -> int:
    code = "" if exemplar.dropped else exemplar.code
    return HEADER_TOKENS + estimate_tokens(code) + estimate_tokens(exemplar.error)


def priority(exemplars: list[Exemplar]) -> list[int]:
    """Indices, most important first: best, accepted, contrasts, built-ins, failures."""

    def key(i: int) -> tuple[int, float]:
        e = exemplars[i]
        return _ROLE_RANK.get(e.role, 5), -(e.speedup or 0.0)

    return sorted(range(len(exemplars)), key=key)


def fit_exemplars(exemplars: list[Exemplar], budget_tokens: int) -> list[Exemplar]:
    """Fit the exemplars' code into ``budget_tokens``, most important first.

    Headers and error excerpts always stay (so every score is shown). Code is kept
    whole while it fits, then the next exemplar's code is shortened (head and tail
    kept) and the rest is dropped. The list's order is kept; each exemplar says
    whether it was truncated or dropped.
    """
    out = list(exemplars)
    left = budget_tokens - sum(HEADER_TOKENS + estimate_tokens(e.error) for e in out)
    for i in priority(out):
        e = out[i]
        if e.dropped or not e.code:
            continue
        need = estimate_tokens(e.code)
        if need <= left:
            left -= need
        elif left >= MIN_CODE_TOKENS:
            code, _ = truncate_code(e.code, left)
            out[i] = replace(e, code=code, truncated=True)
            left -= estimate_tokens(code)
        else:
            out[i] = replace(e, code="", dropped=True, truncated=False)
    return out
