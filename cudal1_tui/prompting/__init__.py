"""Prompt assembly: templates, contrastive exemplar selection, rendering."""

from cudal1_tui.prompting.budget import estimate_tokens, fit_exemplars, truncate_code
from cudal1_tui.prompting.excerpt import error_excerpt
from cudal1_tui.prompting.exemplar_items import (
    Exemplar,
    ExemplarCandidate,
    ExemplarRole,
    exemplar_refs,
)
from cudal1_tui.prompting.exemplar_selection import Selection, SelectionPolicy, select_exemplars
from cudal1_tui.prompting.render import (
    DEFAULT_BUDGET_TOKENS,
    format_exemplars,
    render_contrastive,
    render_repair,
)
from cudal1_tui.prompting.templates import Templates, load_templates

__all__ = [
    "DEFAULT_BUDGET_TOKENS",
    "Exemplar",
    "ExemplarCandidate",
    "ExemplarRole",
    "Selection",
    "SelectionPolicy",
    "Templates",
    "error_excerpt",
    "estimate_tokens",
    "exemplar_refs",
    "fit_exemplars",
    "format_exemplars",
    "load_templates",
    "render_contrastive",
    "render_repair",
    "select_exemplars",
    "truncate_code",
]
