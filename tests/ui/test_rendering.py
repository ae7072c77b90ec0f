"""The pure parts of the UI: diffs, highlighting, CUDA extraction, formats, form parsing."""

from __future__ import annotations

import ui_recorded as recorded
from rich.console import Console

from cudal1_tui.store.export import FORMATS as STORE_FORMATS
from cudal1_tui.ui.code_highlight import STYLES, cuda_sources, highlight
from cudal1_tui.ui.diffing import diff_lines, render_diff, stats
from cudal1_tui.ui.format import max_error, ms_text, record_flags, source_text, speedup_text
from cudal1_tui.ui.screens.export_screen import FORMATS, default_destination
from cudal1_tui.ui.screens.rounds_screen import parse_rounds
from cudal1_tui.ui.screens.settings_screen import parse_settings
from cudal1_tui.ui.widgets.variants import COLUMNS


def _plain(renderable: object, width: int = 120) -> str:
    console = Console(width=width, record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


def test_unified_diff_marks_changed_lines_with_numbers() -> None:
    text = _plain(render_diff(recorded.REFERENCE, recorded.BUILTIN))
    assert "- class Model(nn.Module):" in text
    assert "+ class ModelNew(nn.Module):" in text
    assert "+         return torch.relu(x).mul_(2.0)" in text
    assert stats(recorded.REFERENCE, recorded.BUILTIN) == (2, 2)


def test_split_diff_puts_old_and_new_side_by_side() -> None:
    text = _plain(render_diff(recorded.REFERENCE, recorded.BUILTIN, "split"), width=160)
    row = next(line for line in text.splitlines() if "class Model(" in line)
    assert "class ModelNew(" in row


def test_diff_keeps_three_context_lines_and_marks_skips() -> None:
    old = [f"line {i}" for i in range(30)]
    new = [*old[:15], "changed", *old[16:]]
    kinds = [row.kind for row in diff_lines(old, new)]
    assert kinds == ["equal"] * 3 + ["delete", "insert"] + ["equal"] * 3
    assert _plain(render_diff("a\nb", "a\nb")).strip() == "no differences"


def test_highlight_styles_python_and_the_embedded_cuda() -> None:
    text = highlight(recorded.CUDA_VARIANT)
    styled = {text.plain[s.start:s.end]: str(s.style) for s in text.spans}
    assert styled["class"] == STYLES["keyword"]  # Python keyword
    assert styled["__global__"] == STYLES["keyword"]  # CUDA, inside a Python string
    cuda_types = {w for w, style in styled.items() if style == STYLES["type"]}
    assert {"int", "float"} <= cuda_types  # CUDA types inside the string


def test_cuda_sources_are_extracted_from_python_strings() -> None:
    sources = cuda_sources(recorded.CUDA_VARIANT)
    assert len(sources) == 2  # the kernel file and the one-line C++ declaration
    assert "__global__ void relu2_kernel" in sources[0]
    assert cuda_sources(recorded.BUILTIN) == []


def test_formats_of_records() -> None:
    records = {r.record_id: r for r in recorded.records()}
    assert speedup_text(1.8412) == "1.84×" and speedup_text(None) == "—"
    assert ms_text(0.5) == "500.0 µs" and ms_text(12.345) == "12.35 ms"
    assert source_text("builtin:inplace_ops") == "⚙ inplace_ops"
    longest = source_text("builtin:torch-compile-max-autotune-no-cudagraphs")
    assert longest == "⚙ compile autotune-no-cg"
    assert len(longest) <= {c.key: c.width for c in COLUMNS}["source"]
    assert max_error(records["r1s1"].result) == 2.4e-7 * 3
    assert max_error(records["r2s0"].result) is None
    assert record_flags(records["r2s1"]) == ["input_mutation"]


def test_round_and_settings_forms_reject_bad_values() -> None:
    assert parse_rounds("3") == 3
    assert parse_rounds("0") is None and parse_rounds("x") is None and parse_rounds("101") is None
    values = {"base_url": "http://localhost:30000/v1", "model": "m", "temperature": "0.2",
              "candidates_per_round": "4", "exemplars": "2"}
    assert parse_settings(values) == ({"base_url": "http://localhost:30000/v1", "model": "m",
                                       "temperature": 0.2,
                                       "candidates_per_round": 4, "exemplars": 2}, "")
    _, error = parse_settings({**values, "temperature": "hot"})
    assert "temperature" in error
    _, error = parse_settings({**values, "candidates_per_round": "99"})
    assert "out of range" in error
    _, error = parse_settings({**values, "base_url": ""})  # issue 23: the server's address
    assert "base_url" in error and "http" in error


def test_export_dialog_offers_exactly_the_store_formats() -> None:
    assert [name for name, _ in FORMATS] == list(STORE_FORMATS)
    for name, module in STORE_FORMATS.items():
        assert default_destination("s1", name).endswith("." + module.EXTENSION)
    # the module's default name imports as written in its usage line
    name = default_destination("2026-11-23_0900_relu-2_ab12cd", "module", "relu-2")
    assert name == "optimized_relu_2.py" and name.removesuffix(".py").isidentifier()


def test_info_notes_are_not_integrity_findings() -> None:
    from cudal1_evaluator.schema import Flag
    from cudal1_tui.records import flag_codes

    flags = [Flag("speedup_within_noise", "", "info"), Flag("timer_import", "", "warn"),
             Flag("side_stream", "", "reject")]
    assert flag_codes(flags, include_info=False) == ["timer_import", "side_stream"]
    assert flag_codes(flags, include_info=True) == ["speedup_within_noise", "timer_import",
                                                    "side_stream"]
