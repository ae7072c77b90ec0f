"""Contrastive exemplar selection: buckets, temperature sampling, roles, budget, determinism."""

from __future__ import annotations

import math
import random
from collections import Counter

from cudal1_tui.config import Settings
from cudal1_tui.prompting.budget import estimate_tokens, fit_exemplars, truncate_code
from cudal1_tui.prompting.excerpt import error_excerpt
from cudal1_tui.prompting.exemplar_selection import (
    Exemplar,
    ExemplarCandidate,
    SelectionPolicy,
    bucket_candidates,
    bucket_probabilities,
    sample_buckets,
    select_exemplars,
)
from cudal1_tui.prompting.render import NO_EXEMPLARS, format_exemplars
from cudal1_tui.records import CandidateRecord, ExemplarRef, result_from_stored


def ok(rid: str, speedup: float, **kw: str) -> ExemplarCandidate:
    return ExemplarCandidate(rid, f"class ModelNew:  # {rid}\n    pass\n", "ok", speedup, **kw)


def failed(rid: str, error: str = "boom", code: str = "class ModelNew: ...\n") -> ExemplarCandidate:
    return ExemplarCandidate(rid, code, "compile_error", None, error=error)


# Five buckets (width 0.1 in ln-speedup) of two codes each, about 0.5x .. 3.2x.
_LOGS = [x + d for x in (-0.7, -0.1, 0.3, 0.7, 1.1) for d in (0.03, 0.06)]
SPREAD = [ok(f"c{i}", math.exp(v)) for i, v in enumerate(_LOGS)]


def test_buckets_group_by_log_speedup_and_skip_failures() -> None:
    buckets = bucket_candidates([*SPREAD, failed("f")], width=0.1)
    assert [[m.record_id for m in b.members] for b in buckets] == [
        ["c0", "c1"],
        ["c2", "c3"],
        ["c4", "c5"],
        ["c6", "c7"],
        ["c8", "c9"],
    ]
    assert math.isclose(buckets[0].mean, -0.7 + 0.045)


def test_probabilities_favour_better_buckets_at_low_temperature() -> None:
    buckets = bucket_candidates(SPREAD, width=0.1)
    cold = bucket_probabilities(buckets, temperature=0.05)
    assert cold[-1] > 0.999
    assert cold == sorted(cold)  # monotone in the bucket's score
    hot = bucket_probabilities(buckets, temperature=1000.0)
    assert max(hot) - min(hot) < 0.01
    assert math.isclose(sum(hot), 1.0)


def test_sampling_distribution_follows_temperature() -> None:
    buckets = bucket_candidates(SPREAD, width=0.1)
    rng = random.Random(7)
    cold = Counter(sample_buckets(buckets, 1, 0.05, rng)[0].index for _ in range(2000))
    assert cold[buckets[-1].index] > 1950
    hot = Counter(sample_buckets(buckets, 1, 100.0, rng)[0].index for _ in range(5000))
    for b in buckets:
        assert abs(hot[b.index] / 5000 - 0.2) < 0.03
    # Distinct buckets within a draw; at a middling temperature the best is drawn most often.
    pairs = [sample_buckets(buckets, 2, 0.5, rng) for _ in range(1000)]
    assert all(a.index != b.index for a, b in pairs)
    mid = Counter(b.index for pair in pairs for b in pair)
    assert mid.most_common(1)[0][0] == buckets[-1].index
    assert mid[buckets[0].index] < mid[buckets[-1].index] / 2


def test_selection_is_deterministic_under_a_seed() -> None:
    policy = SelectionPolicy(include_best=False, include_failure=False, include_builtin=False)
    picks = {
        seed: [e.record_id for e in select_exemplars(SPREAD, policy=policy, seed=seed).exemplars]
        for seed in range(12)
    }
    again = [e.record_id for e in select_exemplars(SPREAD, policy=policy, seed=3).exemplars]
    assert again == picks[3]
    assert len({tuple(p) for p in picks.values()}) > 3  # seeds matter
    for ids in picks.values():
        assert len(set(ids)) == 2


def test_roles_best_accepted_builtin_failure_and_contrasts() -> None:
    history = [
        ok("b1", 1.1, source="builtin:torch_compile"),
        ok("m1", 0.6),
        failed("f1", "old error"),
        ok("m2", 2.5),
        ok("m3", 1.6, decision="accepted"),
        ok("m4", 0.9),
        failed("f2", "nvcc: error: expected ';'"),
        failed("f3", "reply had no code", code=""),
    ]
    selection = select_exemplars(history, seed=0)
    roles = {e.record_id: e.role for e in selection.exemplars}
    assert roles["m2"] == "best"
    assert roles["m3"] == "accepted"
    assert roles["f2"] == "failure"  # the most recent failure that has code
    assert "b1" in roles and roles["b1"] == "builtin"
    # Two contrasts drawn beyond best/accepted (a drawn built-in keeps the role "builtin").
    drawn = [r for r, role in roles.items() if role in {"contrast", "builtin"}]
    assert set(drawn) <= {"b1", "m1", "m4"} and len(drawn) in {2, 3}
    assert len(selection.exemplars) == 2 + len(drawn) + 1
    # Successful fastest first, failures last.
    speeds = [e.speedup or 0.0 for e in selection.exemplars if e.status == "ok"]
    assert speeds == sorted(speeds, reverse=True)
    assert selection.exemplars[-1].record_id == "f2"
    assert selection.exemplars[-1].error == "nvcc: error: expected ';'"
    assert selection.refs == [
        ExemplarRef(e.record_id, e.speedup, e.status, e.role) for e in selection.exemplars
    ]


def test_policy_switches() -> None:
    history = [ok("m1", 1.5, decision="accepted"), ok("m2", 2.0), failed("f1")]
    bare = SelectionPolicy(
        contrast=0, include_best=False, include_accepted=False, include_failure=False
    )
    assert select_exemplars(history, policy=bare).exemplars == []
    only_failure = SelectionPolicy(contrast=0, include_best=False, include_accepted=False)
    assert [e.role for e in select_exemplars(history, policy=only_failure).exemplars] == ["failure"]
    assert SelectionPolicy.from_settings(Settings(exemplars=3)).contrast == 3


def test_one_bucket_fills_contrasts_from_it() -> None:
    same = [ok("a", 1.20), ok("b", 1.21), ok("c", 1.22)]
    policy = SelectionPolicy(include_best=False)
    assert len(select_exemplars(same, policy=policy).exemplars) == 2
    strict = SelectionPolicy(include_best=False, fill_same_bucket=False)
    assert len(select_exemplars(same, policy=strict).exemplars) == 1


def test_empty_history_says_none_yet() -> None:
    selection = select_exemplars([], seed=0)
    assert selection.exemplars == [] and selection.refs == []
    assert format_exemplars(selection.exemplars) == NO_EXEMPLARS
    assert "None yet" in NO_EXEMPLARS


def test_only_failures() -> None:
    history = [failed("f1", "first"), failed("f2", "second")]
    selection = select_exemplars(history, seed=0)
    assert [(e.record_id, e.role, e.error) for e in selection.exemplars] == [
        ("f2", "failure", "second")
    ]
    body = format_exemplars(selection.exemplars)
    assert "FAILED, status compile_error (recent failure)" in body and "second" in body


def _long(rid: str, speedup: float, role: str, lines: int = 300) -> Exemplar:
    code = "\n".join(f"x_{i} = {i}  # line {i} of {rid}" for i in range(lines))
    return Exemplar(rid, code, speedup, "ok", role=role)  # type: ignore[arg-type]


def test_truncate_code_keeps_head_and_tail() -> None:
    code = "\n".join(f"line_{i} = {i}" for i in range(400))
    short, omitted = truncate_code(code, 200)
    assert omitted > 0
    assert short.startswith("line_0 = 0\n") and short.endswith("line_399 = 399")
    assert f"# … {omitted} lines omitted …" in short
    assert estimate_tokens(short) <= 200
    assert truncate_code("x = 1", 200) == ("x = 1", 0)


def test_budget_keeps_best_first_then_truncates_then_drops() -> None:
    items = [_long("best", 3.0, "best"), _long("c1", 1.5, "contrast"), _long("c2", 0.8, "contrast")]
    full = sum(estimate_tokens(e.code) for e in items)
    roomy = fit_exemplars(items, full + 500)
    assert roomy == items
    tight = fit_exemplars(items, full * 2 // 3)
    assert tight[0] == items[0]  # the best keeps its whole code
    assert tight[1].truncated and not tight[1].dropped
    assert tight[2].dropped and not tight[2].truncated
    tiny = fit_exemplars(items, 400)
    assert [e.record_id for e in tiny] == ["best", "c1", "c2"]  # order kept, scores kept
    assert tiny[2].dropped and tiny[2].code == "" and tiny[2].speedup == 0.8
    assert tiny[1].dropped
    assert not tiny[0].dropped and tiny[0].truncated
    body = format_exemplars(tiny)
    assert body.count("(code omitted to fit the prompt's token budget)") == 2
    assert "lines omitted" in body


def test_selection_applies_the_budget() -> None:
    history = [ok("a", 2.0), ok("b", 1.0)]
    history = [ExemplarCandidate(c.record_id, c.code * 400, "ok", c.speedup) for c in history]
    selection = select_exemplars(history, seed=0, budget_tokens=500)
    assert any(e.truncated or e.dropped for e in selection.exemplars)
    assert [r.record_id for r in selection.refs] == ["a", "b"]


def test_from_record_excerpts_the_error() -> None:
    log = "\n".join(["[1/3] nvcc ..."] * 50 + ["kernel.cu(12): error: expected a ';'"] + ["x"] * 50)
    record = CandidateRecord(
        record_id="r5-1",
        session_id="s",
        round=5,
        slot=1,
        source="model",
        problem_name="p",
        code="class ModelNew: ...",
        result=result_from_stored({"status": "compile_error", "message": "compilation failed",
                                   "compile_log": log}),
        reward=0.0,
        reward_formula="clipped_speedup",
        status="compile_error",
        speedup=None,
    )
    candidate = ExemplarCandidate.from_record(record, decision="rejected")
    assert candidate.error.startswith("compilation failed\n")
    assert "kernel.cu(12): error: expected a ';'" in candidate.error
    assert len(candidate.error) < 600
    assert candidate.decision == "rejected" and not candidate.ok


def test_error_excerpt_statuses() -> None:
    incorrect = {
        "message": "outputs differ",
        "trials": [
            {"trial": 0, "ok": True, "max_abs_err": 0.0},
            {"trial": 1, "ok": False, "max_abs_err": 0.5, "max_rel_err": 0.25,
             "message": "trial 1"},
        ],
        "tolerance": {"atol": 1e-4, "rtol": 1e-4},
    }
    assert error_excerpt("incorrect", result_from_stored(incorrect, "incorrect")) == (
        "outputs differ\n1 of 2 correctness trials failed; max abs error 0.5, "
        "max rel error 0.25 (tolerance atol=0.0001, rtol=0.0001)\ntrial 1"
    )
    rejected = {"flags": [{"code": "side_stream", "reason": "creates a CUDA stream"}]}
    assert error_excerpt("rejected", result_from_stored(rejected, "rejected")) == (
        "rejected (side_stream): creates a CUDA stream")
    assert error_excerpt("timeout", result_from_stored({}, "timeout")) == "timeout"
    assert error_excerpt("ok", result_from_stored({"message": "x"}, "ok")) == ""
    assert error_excerpt("ok", None, parse_error="no code") == "no code"


def test_ok_without_speedup_is_neither_scored_nor_a_failure() -> None:
    unscored = ExemplarCandidate("u", "class ModelNew: ...\n", "ok", None)
    assert select_exemplars([unscored], seed=0).exemplars == []
