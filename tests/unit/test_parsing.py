"""Reply parsing: 30 recorded reply shapes in tests/data/replies/, each asserted precisely."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from cudal1_tui.llm.parsing import (
    TRUNCATED,
    TRUNCATED_THINK,
    ParsedReply,
    parse_reply,
    syntax_error,
)
from cudal1_tui.llm.reply_text import find_fences, split_think
from cudal1_tui.llm.signature_check import check_signature
from cudal1_tui.problem.model import ClassSignature, Param, Signature
from cudal1_tui.problem.signature import class_signature_of

REPLIES = Path(__file__).resolve().parents[1] / "data" / "replies"
REFERENCE = (REPLIES / "reference_problem.py").read_text()
MODEL = class_signature_of(REFERENCE, "Model")
FINAL_LINE = "        return torch.relu(x @ y) + self.eps"
NO_SECTIONS = [
    "missing section: Performance Analysis",
    "missing section: Algorithm Design",
    "missing section: Code Implementation",
]


@dataclass
class Expect:
    error: str = ""
    warnings: list[str] = field(default_factory=list)
    last_line: str = FINAL_LINE  # "" when no code is expected
    sections: tuple[bool, bool, bool] = (True, True, True)  # which sections are non-empty
    reasoning: str = ""  # a substring of the reasoning


CASES: dict[str, Expect] = {
    "well_formed": Expect(last_line="        return torch.relu_(x @ y).add_(self.eps)"),
    "crlf": Expect(last_line="        return torch.relu_(x @ y).add_(self.eps)"),
    "missing_sections": Expect(warnings=NO_SECTIONS[:2], sections=(False, False, True)),
    "heading_numbered": Expect(),
    "heading_bold_colon": Expect(),
    "list_indented_fence": Expect(),
    "several_blocks": Expect(last_line=FINAL_LINE + "  # final"),
    "last_block_not_modelnew": Expect(
        warnings=["the last python block does not define ModelNew; used an earlier one"]
    ),
    "no_language_tag": Expect(),
    "decorated_forward": Expect(),
    "tildes_fence": Expect(),
    "four_backtick_fence": Expect(),
    "cuda_load_inline": Expect(last_line="        return ext.relu_add_(x @ y, self.eps)"),
    "unfenced_whole": Expect(
        warnings=[*NO_SECTIONS, "the code was not in a fenced block"],
        sections=(False, False, False),
    ),
    "unfenced_after_heading": Expect(
        warnings=["the code was not in a fenced block"],
        last_line="        return torch.clamp_min(x @ y, 0.0) + self.eps",
    ),
    "prose_inside_block": Expect(warnings=["dropped 1 line(s) of prose inside the code block"]),
    "think_inline": Expect(reasoning="a thought, not the answer"),
    "think_close_only": Expect(reasoning="server that drops the opening tag"),
    "varargs_forward": Expect(
        warnings=["ModelNew.forward takes *args instead of Model.forward(x, y)"]
    ),
    "renamed_params": Expect(
        warnings=[
            "ModelNew.forward(a, b) does not match Model.forward(x, y): parameter names differ"
        ],
        last_line="        return torch.relu(a @ b) + self.eps",
    ),
    "truncated": Expect(error=TRUNCATED, last_line=""),
    "think_unclosed": Expect(
        error=TRUNCATED_THINK,
        warnings=NO_SECTIONS,
        last_line="",
        sections=(False, False, False),
        reasoning="Let me think about tiling",
    ),
    "empty": Expect(
        error="the reply is empty",
        warnings=NO_SECTIONS,
        last_line="",
        sections=(False, False, False),
    ),
    "no_code": Expect(
        error="the reply has no python code block",
        warnings=["missing section: Code Implementation"],
        last_line="",
        sections=(True, True, False),
    ),
    "only_cuda_block": Expect(
        error="the reply has no python code block (only cuda blocks)", last_line=""
    ),
    "wrong_class_name": Expect(error="the code defines no class ModelNew (classes found: Model)"),
    "syntax_error": Expect(
        error="the code does not parse: syntax error at line 10, column 28: expected ':'"
    ),
    "forward_mismatch": Expect(
        error="ModelNew.forward(x) does not match Model.forward(x, y): "
        "keep the parameters of Model.forward",
        last_line="        return torch.relu(x) + self.eps",
    ),
    "init_mismatch": Expect(
        error="ModelNew.__init__() does not match Model.__init__(dim, eps=…): "
        "keep the parameters of Model.__init__"
    ),
    "no_forward": Expect(error="ModelNew defines no forward method"),
}


def _parse(name: str) -> ParsedReply:
    # Bytes, so that CRLF line endings reach the parser as they were recorded.
    text = (REPLIES / f"{name}.md").read_bytes().decode("utf-8")
    return parse_reply(text, model_signature=MODEL)


def test_every_fixture_has_a_case() -> None:
    assert sorted(p.stem for p in REPLIES.glob("*.md")) == sorted(CASES)
    assert len(CASES) >= 20


@pytest.mark.parametrize("name", sorted(CASES))
def test_reply_shape(name: str) -> None:
    expect = CASES[name]
    reply = _parse(name)
    assert reply.error == expect.error
    assert reply.warnings == expect.warnings
    assert reply.ok == (not expect.error)
    if expect.last_line:
        assert reply.code.endswith(expect.last_line + "\n")
        assert ("class ModelNew" in reply.code) == (name != "wrong_class_name")
        assert "```" not in reply.code.splitlines()[0]
    else:
        assert reply.code == ""
    s = reply.sections
    filled = (bool(s.performance_analysis), bool(s.algorithm_design), bool(s.code_implementation))
    assert filled == expect.sections
    if expect.reasoning:
        assert expect.reasoning in reply.reasoning
    else:
        assert reply.reasoning == ""
    assert "<think>" not in reply.code and "</think>" not in s.performance_analysis


def test_sections_text_is_exact() -> None:
    s = _parse("heading_bold_colon").sections
    assert s.performance_analysis == (
        "Both earlier variants were bound by the extra elementwise kernel."
    )
    assert s.algorithm_design == "keep the matmul, fuse the rest."
    assert s.code_implementation.startswith("```python\nimport torch")
    numbered = _parse("heading_numbered").sections
    assert numbered.algorithm_design == "Fuse the elementwise tail."


def test_crlf_matches_lf() -> None:
    crlf, lf = _parse("crlf"), _parse("well_formed")
    assert crlf.code == lf.code and "\r" not in crlf.code
    assert crlf.sections == lf.sections


def test_cuda_block_is_kept_inside_python_source() -> None:
    reply = _parse("cuda_load_inline")
    assert "__global__ void relu_add" in reply.code
    assert "load_inline(" in reply.code
    assert reply.code.startswith("import torch\n")


def test_think_code_is_not_the_answer() -> None:
    reply = _parse("think_inline")
    assert "class ModelNew: pass" not in reply.code
    assert "class ModelNew: pass" in reply.reasoning


def test_reasoning_argument_is_kept_first() -> None:
    reply = parse_reply(
        "<think>inline</think>\n" + (REPLIES / "well_formed.md").read_text(),
        "from the server",
        model_signature=MODEL,
    )
    assert reply.reasoning == "from the server\n\ninline"


def test_strict_names_turns_a_rename_into_an_error() -> None:
    text = (REPLIES / "renamed_params.md").read_text()
    reply = parse_reply(text, model_signature=MODEL, strict_names=True)
    assert reply.error.endswith("parameter names differ")
    assert not reply.ok


def test_without_reference_signature_only_syntax_and_class_are_checked() -> None:
    reply = parse_reply((REPLIES / "forward_mismatch.md").read_text(), model_signature=None)
    assert reply.ok and reply.warnings == []


def test_signature_of_reference() -> None:
    assert (
        ClassSignature(
            init=Signature([Param("dim", annotation="int"),
                            Param("eps", default="1e-5", annotation="float")]),
            forward=Signature([Param("x", annotation="torch.Tensor"),
                               Param("y", annotation="torch.Tensor")]),
            bases=("nn.Module",),
        )
        == MODEL
    )
    assert class_signature_of(REFERENCE, "ModelNew") is None


def test_signature_kinds() -> None:
    source = (
        "class A(B, metaclass=M):\n    def forward(self, a, /, b: int, *rest, c, d=2, **kw): ...\n"
    )
    sig = class_signature_of(source, "A")
    assert sig is not None and sig.init is None and sig.forward is not None
    assert sig.forward.params == [
        Param("a", kind="positional_only"),
        Param("b", annotation="int"),
        Param("rest", kind="var_positional"),
        Param("c", kind="keyword_only"),
        Param("d", default="2", kind="keyword_only"),
        Param("kw", kind="var_keyword"),
    ]


def _sig(*params: Param) -> Signature:
    return Signature(list(params))


def test_check_signature_rules() -> None:
    ref = ClassSignature(init=_sig(), forward=_sig(Param("x")))
    extra_optional = ClassSignature(init=None, forward=_sig(Param("x"), Param("scale", "1.0")))
    errors, warnings = check_signature(extra_optional, ref)
    assert errors == [] and warnings == [
        "ModelNew.forward takes extra optional parameters: (x, scale=…)"
    ]
    required_kw = ClassSignature(init=None,
                                 forward=_sig(Param("x"), Param("k", kind="keyword_only")))
    errors, _ = check_signature(required_kw, ref)
    assert errors == [
        "ModelNew.forward(x, k) does not match Model.forward(x): keep the parameters of "
        "Model.forward"
    ]
    inherits = ClassSignature(init=None, forward=None, bases=("Model",))
    assert check_signature(inherits, ref) == ([], [])
    no_init_but_needed = ClassSignature(init=None, forward=_sig(Param("x")))
    ref_with_init = ClassSignature(init=_sig(Param("n")), forward=_sig(Param("x")))
    errors, _ = check_signature(no_init_but_needed, ref_with_init)
    assert errors == [
        "ModelNew.__init__() does not match Model.__init__(n): keep the parameters of "
        "Model.__init__"
    ]


def test_find_fences_reports_unclosed_and_languages() -> None:
    fences = find_fences("a\n```cuda\nk\n```\n~~~\nx = 1\n~~~\n```python\ny")
    assert [(f.lang, f.closed, f.line) for f in fences] == [
        ("cuda", True, 2),
        ("", True, 5),
        ("python", False, 8),
    ]


def test_split_think_unclosed() -> None:
    assert split_think("answer <think>cut", "") == ("answer ", "cut", True)


def test_syntax_error_messages() -> None:
    assert syntax_error("x = 1\n") == ""
    assert syntax_error("def f(:\n    pass\n") == "syntax error at line 1, column 7: invalid syntax"


def test_garbage_never_raises() -> None:
    for text in ["```", "~~~~", "<think>", "</think>", "\x00\x01", "#" * 10000, "```python\n\x00"]:
        reply = parse_reply(text, model_signature=MODEL)
        assert isinstance(reply.error, str) and reply.error
