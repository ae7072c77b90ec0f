"""Prompt templates and rendering, checked against golden files.

Regenerate the golden files after an intended change with
``CUDAL1_UPDATE_GOLDEN=1 python -m pytest tests/unit/test_prompting.py`` and review the diff.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from cudal1_tui.errors import ConfigError
from cudal1_tui.prompting import (
    ExemplarCandidate,
    estimate_tokens,
    load_templates,
    render_contrastive,
    render_repair,
    select_exemplars,
)
from cudal1_tui.prompting.render import fenced
from cudal1_tui.prompting.templates import Templates, shipped_dir, substitute
from cudal1_tui.records import Message

DATA = Path(__file__).resolve().parents[1] / "data"
GOLDEN = DATA / "golden"
PROBLEM = (DATA / "replies" / "reference_problem.py").read_text()
UPDATE = os.environ.get("CUDAL1_UPDATE_GOLDEN") == "1"
DEVICE = "NVIDIA H100 80GB HBM3"

COMPILED = """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self._fn = torch.compile(self._forward, mode="max-autotune-no-cudagraphs")

    def _forward(self, x, y):
        return torch.relu(x @ y) + self.eps

    def forward(self, x, y):
        return self._fn(x, y)
"""
FUSED = """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps

    def forward(self, x, y):
        return torch.relu_(x @ y).add_(self.eps)
"""
BROKEN = """import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

ext = load_inline(name="k", cpp_sources="", cuda_sources="__global__ void k() { int i = 0 }")


class ModelNew(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()

    def forward(self, x, y):
        return ext.k(x, y)
"""
HISTORY = [
    ExemplarCandidate("r0-0", COMPILED, "ok", 0.84, source="builtin:torch_compile"),
    ExemplarCandidate("r1-0", FUSED, "ok", 1.37),
    ExemplarCandidate(
        "r1-1",
        BROKEN,
        "compile_error",
        None,
        error='compilation failed\nk.cu(1): error: expected a ";"',
    ),
]


def _templates() -> Templates:
    return load_templates(GOLDEN / "no-overrides-here")


def _as_text(messages: list[Message]) -> str:
    return "".join(f"===== {m.role} =====\n{m.content}\n" for m in messages)


def _golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.is_file(), f"{path} missing: run with CUDAL1_UPDATE_GOLDEN=1"
    assert text == path.read_text(encoding="utf-8"), f"{name} differs from the golden file"


def test_contrastive_prompt_with_history_golden() -> None:
    selection = select_exemplars(HISTORY, seed=0)
    messages = render_contrastive(
        _templates(),
        PROBLEM,
        selection.exemplars,
        device=DEVICE,
        reference_ms=0.0421,
        budget_tokens=12000,
    )
    assert [m.role for m in messages] == ["system", "user"]
    _golden("contrastive_with_history.txt", _as_text(messages))
    user = messages[1].content
    assert "speedup 1.37x (current best)" in user
    assert "speedup 0.84x (built-in strategy: torch_compile)" in user
    assert "FAILED, status compile_error (recent failure)" in user
    assert 'k.cu(1): error: expected a ";"' in user
    assert "0.0421 ms per forward call" in user and DEVICE in user


def test_first_round_prompt_golden() -> None:
    messages = render_contrastive(
        _templates(), PROBLEM, [], device="cpu", reference_ms=None, budget_tokens=12000
    )
    _golden("contrastive_first_round.txt", _as_text(messages))
    assert "None yet" in messages[1].content
    assert "Reference timing: not measured yet" in messages[1].content


def test_budget_prompt_golden() -> None:
    long_code = FUSED + "".join(f"# tuning note {i}: block size {32 * i}\n" for i in range(400))
    history = [*HISTORY, ExemplarCandidate("r2-0", long_code, "ok", 1.1)]
    selection = select_exemplars(history, seed=0)
    messages = render_contrastive(
        _templates(),
        PROBLEM,
        selection.exemplars,
        device=DEVICE,
        reference_ms=0.0421,
        budget_tokens=2200,
    )
    _golden("contrastive_budget.txt", _as_text(messages))
    user = messages[1].content
    assert "lines omitted …" in user and "(code omitted to fit" in user
    assert FUSED.rstrip() in user  # the best keeps its whole code
    assert "speedup 1.10x (earlier variant)\n\n(code shortened" in user
    assert "speedup 0.84x (built-in strategy: torch_compile)\n\n(code omitted" in user
    total = sum(estimate_tokens(m.content) for m in messages)
    assert total <= 2200 + 200  # headers are estimated, so allow a little slack


def test_repair_prompt_golden() -> None:
    messages = render_repair(_templates(), PROBLEM, HISTORY[2], device=DEVICE, reference_ms=0.0421)
    _golden("repair_compile_error.txt", _as_text(messages))
    user = messages[1].content
    assert "Status: compile_error" in user
    assert "int i = 0 }" in user and 'error: expected a ";"' in user
    assert "## Code Implementation" in user


def test_shipped_contrastive_follows_the_paper_structure() -> None:
    text = _templates().contrastive
    headings = [
        "# Task for CUDA optimization",
        "# Reference Code",
        "# Previous CUDA Implementations with Scores",
        "# Generation Protocol",
        "## Performance Analysis",
        "## Algorithm Design",
        "## Code Implementation",
        "# Requirements and Restrictions",
    ]
    lines = text.splitlines()
    positions = [lines.index(h) for h in headings]
    assert positions == sorted(positions)
    for rule in ["No caching", "No extra CUDA streams or threads", "Do not change any size"]:
        assert rule in text
    assert "class ModelNew" in text and "load_inline" in text and "Triton" in text


def test_templates_come_from_the_checkout() -> None:
    templates = _templates()
    assert templates.sources["system.md"] == shipped_dir() / "system.md"
    assert shipped_dir().name in {"prompts", "_prompts"}


def test_override_replaces_one_template(tmp_path: Path) -> None:
    (tmp_path / "system.md").write_text("You are terse. Device: {{device}}\n")
    templates = load_templates(tmp_path)
    assert templates.sources["system.md"] == tmp_path / "system.md"
    assert templates.sources["repair.md"] == shipped_dir() / "repair.md"
    messages = render_contrastive(templates, PROBLEM, [], device="cpu", reference_ms=1.0)
    assert messages[0].content == "You are terse. Device: cpu\n"


def test_default_override_dir_is_beside_the_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDAL1_CONFIG", str(tmp_path / "config.toml"))
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "system.md").write_text("custom system\n")
    assert load_templates().system == "custom system\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("no placeholders at all\n", "lacks the placeholder(s) {{exemplars}}, {{reference_code}}"),
        (
            "{{reference_code}} {{exemplars}} {{exemplar}}\n",
            "uses unknown placeholder(s) {{exemplar}}; allowed: {{device}}, {{exemplars}}",
        ),
        ("   \n", "is empty"),
    ],
)
def test_bad_override_is_a_config_error(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "contrastive.md").write_text(text)
    with pytest.raises(ConfigError) as info:
        load_templates(tmp_path)
    assert message in info.value.message
    assert str(tmp_path / "contrastive.md") in info.value.message
    assert info.value.path == tmp_path / "contrastive.md"


def test_non_utf8_override(tmp_path: Path) -> None:
    (tmp_path / "repair.md").write_bytes(b"\xff\xfe{{error}}")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_templates(tmp_path)


def test_substitution_is_single_pass() -> None:
    assert substitute("a {{x}} b {{ y }}", {"x": "{{y}}", "y": "Y"}) == "a {{y}} b Y"
    tricky = "class Model:\n    '''{{exemplars}} and ${x} and {0}'''\n"
    messages = render_contrastive(_templates(), tricky, [], device="cpu", reference_ms=None)
    assert tricky.rstrip() in messages[1].content
    assert "None yet" in messages[1].content


def test_fence_is_longer_than_backticks_in_code() -> None:
    block = fenced('doc = """\n```\nexample\n```\n"""', "python")
    assert block.startswith("````python\n") and block.endswith("\n````")
    assert re.match(r"^```python\n", fenced("x = 1", "python"))
