"""The display options: the default renders as before; the masked mode hides measurements."""

from __future__ import annotations

from cudal1_tui.ui.display import DisplayOptions
from cudal1_tui.ui.format import error_text, ms_text, speedup_text, tokens_rate_text


def test_default_renders_measurements_unchanged() -> None:
    shown = DisplayOptions()
    assert shown.speedup(1.234) == speedup_text(1.234) == "1.23×"
    assert shown.ms(0.0123) == ms_text(0.0123) and shown.ms(4.5) == "4.50 ms"
    assert shown.error(3e-7) == error_text(3e-7)
    assert shown.rate(57, 12.3) == tokens_rate_text(57, 12.3)
    assert shown.session("2026-11-21_0724_relu_22ff5c") == "2026-11-21_0724_relu_22ff5c"
    assert shown.flags(["reference_pristine_reused", "input_mutation"]) == [
        "reference_pristine_reused", "input_mutation"]
    assert shown.chart([1.0, 2.5]) == [1.0, 2.5]
    assert shown.measured_style("bold green") == "bold green"


def test_masked_mode_hides_every_measurement_but_keeps_the_rest() -> None:
    shown = DisplayOptions(mask_measurements=True, session_label="demo")
    assert shown.speedup(1.234) == shown.speedup(0.5) == "•.••×"
    assert shown.ms(0.0123) == shown.ms(4.5) == "•.•• ms"
    assert shown.error(3e-7) == "•.•e-••"
    assert shown.rate(57, 12.3) == "57 tokens · •• tok/s"
    assert shown.session("2026-11-21_0724_relu_22ff5c") == "demo"
    # a missing value stays visibly missing, and a real finding stays visible
    assert shown.speedup(None) == "—" and shown.ms(None) == "—" and shown.session("") == ""
    assert shown.flags(["reference_pristine_reused", "speedup_within_noise",
                        "input_mutation"]) == ["input_mutation"]
    assert shown.chart([1.0, 2.5, 0.3]) == [1.0, 1.0, 1.0]
    assert shown.measured_style("bold green") == ""
