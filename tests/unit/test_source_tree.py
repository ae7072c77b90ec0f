"""The one source reader: trees cached by text, the problem parsed once, one signature type."""

from __future__ import annotations

import textwrap
from pathlib import Path

from cudal1_tui.analysis import source_tree as ts
from cudal1_tui.analysis.gate import check_candidate
from cudal1_tui.analysis.parsed_problem import ParsedProblem, parse_problem
from cudal1_tui.llm.parsing import parse_reply
from cudal1_tui.problem.inspect import inspect_source
from cudal1_tui.problem.model import ClassSignature, Param, Signature
from cudal1_tui.problem.signature import class_signature_of

ROOT = Path(__file__).resolve().parents[2]
PROBLEM = (ROOT / "tests" / "data" / "replies" / "reference_problem.py").read_text()
CANDIDATE = PROBLEM.replace("class Model(", "class ModelNew(")


def test_the_same_text_is_parsed_once() -> None:
    source = "x = 1  # test_the_same_text_is_parsed_once\n"
    assert ts.parse_python(source) is ts.parse_python(source)
    assert ts.parse_python(source) is not ts.parse_python(source + "\n")


def test_cpython_error_names_line_and_reason() -> None:
    error = ts.cpython_error("def f(:\n    pass\n")
    assert error is not None and error.syntax and error.line == 1
    nul = ts.cpython_error("x = 1\x00\n")
    assert nul is not None and "null" in nul.message  # reported, never raised
    assert ts.cpython_error("x = 1\n") is None


def test_problem_is_parsed_once_for_many_candidates() -> None:
    problem = PROBLEM + "# test_problem_is_parsed_once_for_many_candidates\n"
    before = parse_problem.cache_info()
    for i in range(5):
        check_candidate(CANDIDATE + f"# candidate {i}\n", problem)
    after = parse_problem.cache_info()
    assert after.misses == before.misses + 1
    assert after.hits == before.hits + 4


def test_gate_judges_a_parsed_problem_as_its_text() -> None:
    parsed = parse_problem(PROBLEM)
    assert isinstance(parsed, ParsedProblem) and parsed.fp32 and not parsed.switches_mode
    bad = CANDIDATE.replace("torch.relu(", "torch.relu(x.half() @ y.half()) + 0 * torch.relu(")
    for candidate in (CANDIDATE, bad, "class ModelNew(:\n"):
        assert check_candidate(candidate, parsed) == check_candidate(candidate, PROBLEM)
    assert "precision" in {f.code for f in check_candidate(bad, parsed)}


def test_problem_and_reply_share_one_signature_type() -> None:
    inspection = inspect_source(PROBLEM)
    reference = class_signature_of(PROBLEM, "Model")
    assert isinstance(reference, ClassSignature)
    assert reference.forward == inspection.forward and reference.init == inspection.init
    assert reference.init == Signature([Param("dim", annotation="int"),
                                        Param("eps", "1e-5", annotation="float")])


def test_reply_checked_against_the_problems_signature() -> None:
    reference = class_signature_of(PROBLEM, "Model")
    code = CANDIDATE.replace("def forward(self, x: torch.Tensor, y: torch.Tensor)",
                             "def forward(self, x, *, y)")
    reply = parse_reply(f"```python\n{code}```\n", model_signature=reference)
    assert reply.error == (
        "ModelNew.forward(x, y) does not match Model.forward(x, y): keep the parameters of "
        "Model.forward")


def test_positional_only_and_splat_kinds() -> None:
    source = textwrap.dedent('''
        class A:
            def forward(self, a, /, b: int = 2, *rest: int, c, **kw): ...
    ''')
    signature = class_signature_of(source, "A")
    assert signature is not None and signature.forward is not None
    assert [(p.name, p.kind, p.has_default) for p in signature.forward.params] == [
        ("a", "positional_only", False), ("b", "positional", True),
        ("rest", "var_positional", False), ("c", "keyword_only", False),
        ("kw", "var_keyword", False)]
