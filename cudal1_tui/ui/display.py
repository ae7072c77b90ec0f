"""Display options: the app's "masked measurements" mode.

With ``mask_measurements`` on, every number derived from a clock (speedups, times,
tokens per second, max errors, the chart's values) is drawn as a fixed placeholder, and
``session_label`` (when set) stands in for the session id. Statuses, sources, flags,
diffs, code and analysis stay real. Snapshot tests driven by the real engine use it so
the pictures do not depend on the machine's speed or clock; it also suits screenshots
for the docs. The default leaves the normal rendering untouched.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.dom import DOMNode

from cudal1_evaluator.schema import TIMING_NOTES
from cudal1_tui.ui.format import error_text, ms_text, speedup_text, tokens_rate_text

MASK_SPEEDUP = "•.••×"
MASK_TIME = "•.•• ms"
MASK_ERROR = "•.•e-••"
MASK_RATE = "•• tok/s"


@dataclass(frozen=True)
class DisplayOptions:
    mask_measurements: bool = False
    session_label: str | None = None  # shown instead of the session id when set

    def speedup(self, value: float | None, bound: str = "") -> str:
        if self.mask_measurements and value is not None:
            return MASK_SPEEDUP
        return speedup_text(value, bound)

    def measured_style(self, style: str) -> str:
        """A value-dependent ``style``, or none when masked: the colour would tell the value."""
        return "" if self.mask_measurements else style

    def ms(self, value: float | None) -> str:
        return MASK_TIME if self.mask_measurements and value is not None else ms_text(value)

    def error(self, value: float | None) -> str:
        return MASK_ERROR if self.mask_measurements and value is not None else error_text(value)

    def rate(self, tokens: int, per_s: float) -> str:
        if self.mask_measurements and per_s:
            return f"{tokens} tokens · {MASK_RATE}"
        return tokens_rate_text(tokens, per_s)

    def flags(self, codes: list[str]) -> list[str]:
        return [c for c in codes if c not in TIMING_NOTES] if self.mask_measurements else codes

    def session(self, session_id: str) -> str:
        return self.session_label if self.session_label is not None and session_id else session_id

    def chart(self, values: list[float]) -> list[float]:
        """The sparkline's data: flat when masked, so its shape tells nothing either."""
        return [1.0] * len(values) if self.mask_measurements else values


DEFAULT = DisplayOptions()


def display_of(node: DOMNode) -> DisplayOptions:
    """The running app's display options; the defaults outside a CudaL1App."""
    try:
        options = getattr(node.app, "display_options", DEFAULT)
    except Exception:  # no active app (a widget rendered outside one)
        return DEFAULT
    return options if isinstance(options, DisplayOptions) else DEFAULT
