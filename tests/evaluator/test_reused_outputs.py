"""Outputs of different calls in one memory (``reused``): how a reused call is reported and
counted, and what a check result with a reused call leads to (docs/security.md, round 39).

A reused call is never compared: its memory holds a later call's output. What makes that
safe is the branch of ``Conductor._round`` the evaluations here hold: any check result with
``reused`` either drops every window timed so far and times the candidate again, copying
each output (``_time_again_with_copies``), or, when it is copying already, rejects it
(``copies_not_made``) under every reward policy.
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from evaluator_cases import LINEAR_HONEST, LINEAR_PROBLEM, job, linear_candidate

from cudal1_evaluator.common.compare import Comparison
from cudal1_evaluator.isolation.sandbox import Outcome
from cudal1_evaluator.launch import evaluate
from cudal1_evaluator.parent import conduct, verdict
from cudal1_evaluator.parent.conduct import Evidence
from cudal1_evaluator.schema import Result, RewardSpec, TrialReport
from cudal1_evaluator.trusted.referee import LATE_MESSAGE, Referee
from cudal1_evaluator.wire.report import Recheck, WorkerReport

# The same buffer from every call, written in place (a CUDA graph's static output, on a CPU)
STATIC = linear_candidate(
    "        if getattr(self, 'out', None) is None:\n"
    "            self.out = torch.empty(x.shape[0], self.fc.out_features)\n"
    "        self.out.copy_(torch.relu(self.fc(x)))\n"
    "        return self.out")


def test_a_reused_call_is_reported_as_not_compared_and_not_counted_as_compared() -> None:
    """A reused call that did not fail was never judged: ``compared`` False, and the recheck
    leaves it out of the "N of M timed outputs" (a failing one counts, compared or not)."""
    unjudged = Referee._result(None, [], late=False)
    assert unjudged["ok"] and unjudged["reused"] and not unjudged["compared"]
    assert unjudged["message"].startswith("not compared")
    late = Referee._result(None, [], late=True)
    assert not late["ok"] and not late["compared"] and late["message"] == LATE_MESSAGE
    right = Referee._result(Comparison(True), [], late=False)
    wrong = Referee._result(Comparison(False, 1.0, 1.0, "outside atol"), [], late=False)
    assert right["compared"] and wrong["compared"] and not right["reused"]

    fake = SimpleNamespace(ev=Evidence(trials=[TrialReport(0, True)], timed=True))
    conduct.Conductor._recheck(fake, [unjudged] * 3 + [right])  # type: ignore[arg-type]
    assert fake.ev.recheck == Recheck(1, 0, "")
    conduct.Conductor._recheck(fake, [unjudged, wrong, late])  # type: ignore[arg-type]
    assert fake.ev.recheck == Recheck(3, 2, "timed call 2: outside atol")
    flags = verdict._flags_of(Outcome(returncode=0), WorkerReport(phase="done"), fake.ev)
    reason = next(f.reason for f in flags if f.code == "timed_output_mismatch")
    assert reason.startswith("2 of 3 timed outputs checked")


@dataclass
class Round:
    """One round of a real evaluation, as the spy saw it."""

    copying: bool  # the candidate copied its outputs in this round
    reused: bool  # its check reported a reused call
    kept_before: int  # windows kept, every side, when the round began
    kept_after: int
    copying_after: bool
    flags: set[str]


class Spy:
    """``Conductor._round`` and ``_side_window`` watched in a real evaluation, and the
    candidate's word on where its outputs lie changed (``tamper``) in chosen rounds: call
    0's output said to lie where call 1's does, as a runner whose copies share memory
    says. Nothing trusted is changed: the parent reads, the referee checks, the branch acts."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, tamper: Any) -> None:
        self.rounds: list[Round] = []
        self.tamper = tamper  # (conductor, rounds so far) -> whether to tamper this round
        self._reused = False
        self._tampering = False
        side_window, run_round = conduct.Conductor._side_window, conduct.Conductor._round
        released = conduct.Conductor._released

        def checked(cond: conduct.Conductor, side: str, calls: int) -> Any:
            burst, results = side_window(cond, side, calls)
            if side == "candidate":
                self._reused = any(r.get("reused") for r in results)
            return burst, results

        def watched(cond: conduct.Conductor, keep: bool) -> None:
            copying, before = cond.copy_outputs, _kept(cond)
            self._tampering, self._reused = bool(tamper(cond, self.rounds)), False
            run_round(cond, keep)
            self.rounds.append(Round(copying, self._reused, before, _kept(cond),
                                     cond.copy_outputs, {f.code for f in cond.ev.flags}))

        def told(cond: conduct.Conductor, side: str, *args: Any, **kw: Any) -> Any:
            word = released(cond, side, *args, **kw)
            at = word.get("at")
            if side == "candidate" and self._tampering and isinstance(at, list) and len(at) > 1:
                at[0] = at[1]
            return word

        monkeypatch.setattr(conduct.Conductor, "_side_window", checked)
        monkeypatch.setattr(conduct.Conductor, "_round", watched)
        monkeypatch.setattr(conduct.Conductor, "_released", told)

    def assert_the_invariant(self) -> None:
        """Every round whose check saw a reused call: timed again with copies, every window
        dropped (not copying yet), or ``copies_not_made`` (copying already)."""
        for i, r in enumerate(self.rounds):
            if r.reused and not r.copying:
                assert r.copying_after and r.kept_after == 0, (i, r)
            elif r.reused:
                assert "copies_not_made" in r.flags, (i, r)


def _kept(cond: conduct.Conductor) -> int:
    return sum(len(windows) for windows in cond.ev.timed_sides().values())


def _rejects(result: Result) -> set[str]:
    return {f.code for f in result.flags if f.severity == "reject"}


@pytest.mark.parametrize("policy", ["zero", "full"])
def test_a_static_output_is_timed_again_with_copies_and_a_reuse_then_rejected(
        monkeypatch: pytest.MonkeyPatch, policy: str) -> None:
    """A real static output: its first window's check reports the calls a later call
    overwrote; the candidate is timed again copying each output. Once it copies, its word
    makes two copies share memory: ``copies_not_made``, a reject whatever the policy."""
    spy = Spy(monkeypatch, lambda cond, rounds: cond.copy_outputs)
    result = evaluate(job(LINEAR_PROBLEM, STATIC,
                          reward=RewardSpec(policy={"static_outputs": policy})))
    spy.assert_the_invariant()
    first = next(r for r in spy.rounds if r.reused)
    assert not first.copying, "the static output was seen before any tampering"
    assert any(r.reused and r.copying for r in spy.rounds)
    assert result.status == "rejected" and result.reward == 0.0, result.message
    assert "copies_not_made" in _rejects(result)
    assert ("output_buffer_reused" in _rejects(result)) is (policy == "zero")


def test_a_reuse_seen_in_a_kept_round_drops_every_window_kept_so_far(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An honest candidate whose word, in a round after windows were kept, says two calls'
    outputs share memory: every kept window is dropped and it is timed again copying; said
    again while copying: ``copies_not_made``, even where static outputs are paid in full."""

    def tamper(cond: conduct.Conductor, rounds: list[Round]) -> bool:
        return _kept(cond) > 0 and not any(r.reused and r.copying for r in rounds)

    spy = Spy(monkeypatch, tamper)
    result = evaluate(job(LINEAR_PROBLEM, LINEAR_HONEST,
                          reward=RewardSpec(policy={"static_outputs": "full"})))
    spy.assert_the_invariant()
    dropped = next(r for r in spy.rounds if r.reused)
    assert not dropped.copying and dropped.kept_before > 0 and dropped.kept_after == 0
    assert any(r.reused and r.copying for r in spy.rounds)
    assert result.status == "rejected" and result.reward == 0.0, result.message
    assert "copies_not_made" in _rejects(result)


# Each output written into a shared mapping of one of the runner's pool input slot files (the
# exchange dir's, mapped once), one slot a call in turn after the trials' 4 calls: the same
# memory in every window, never a call's input (round 40, found through a C++ extension)
IN_POOL_INPUTS = linear_candidate(
    "        self.n = getattr(self, 'n', 0) + 1\n"
    "        out = torch.relu(self.fc(x))\n"
    "        nbytes = out.numel() * out.element_size()\n"
    "        paths = [p for p in sorted(glob.glob('/dev/shm/cudal1-eval-*/xchg-*/t*.bin'))\n"
    "                 if os.path.getsize(p) >= nbytes] if self.n > 4 else []\n"
    "        if not paths:\n"
    "            return out\n"
    "        path = paths[self.n % len(paths)]\n"
    "        if path not in _MAPPED:\n"
    "            _MAPPED[path] = torch.from_file(path, shared=True, size=out.numel(),\n"
    "                                            dtype=out.dtype)\n"
    "        held = _MAPPED[path].view(out.shape)\n"
    "        held.copy_(out)\n"
    "        return held",
    "import glob\n\n_MAPPED = {}\n")


def test_outputs_kept_in_the_pools_input_files_are_held_over() -> None:
    """Round 40: outputs written into the runner's mapping of the pool's input slot files lie
    where the last window's did, in a file that is no call's input: the held-over rule
    applies (an output is exempt only inside its own call's set file)."""
    result = evaluate(job(LINEAR_PROBLEM, IN_POOL_INPUTS))
    assert result.status == "rejected" and result.reward == 0.0, result.message
    assert "output_buffer_reused" in _rejects(result)


# Each right output freed by the next call as CUDA graph trees free a held output (its
# ``describe`` then says a later call freed it); the first two calls after the trials' 4 (the
# first two of the first timed window) wrong, and kept whole: no later output lies over them
# (the referee would leave such a call uncompared, as ``reused``)
WRONG_AMONG_FREED = linear_candidate(
    "        self.n = getattr(self, 'n', 0) + 1\n"
    "        out = torch.relu(self.fc(x))\n"
    "        if getattr(self, 'last', None) is not None and self.n - 1 not in (5, 6):\n"
    "            self.last.untyped_storage().resize_(0)\n"
    "        if self.n in (5, 6):\n"
    "            out.add_(1.0)\n"
    "            _KEPT.append(out)\n"
    "        self.last = out\n"
    "        return out",
    "_KEPT = []\n")


@pytest.mark.parametrize("policy", ["zero", "full"])
def test_wrong_outputs_freed_after_each_call_are_counted_on_their_step_sample(
        policy: str) -> None:
    """Round 40: the candidate's word that a later call freed its outputs dropped every
    failure of that window (such outputs are gone when the parent reads them whole): under
    ``full`` this candidate was ``ok``. Now only the failure of a call whose step sample,
    read when it said it was done, passed is dropped: a wrong call's sample fails, and so
    does the evaluation, whatever the policy."""
    result = evaluate(job(LINEAR_PROBLEM, WRONG_AMONG_FREED,
                          reward=RewardSpec(policy={"static_outputs": policy})))
    assert result.status == "incorrect" and result.reward == 0.0, result.message
    assert "timed_output_mismatch" in _rejects(result)


def _sample(call: int, elements: list[int], values: list[float]) -> list[Any]:
    return [call, 0, elements, struct.pack(f"{len(values)}f", *values).hex()]


def test_the_referee_judges_a_step_sample_as_the_check_judges_the_whole_output() -> None:
    """``Referee.sampled``: a call agrees when the expected output with its sampled elements
    in their places passes the check (the tolerance scaled by the whole expected output's
    largest value, not the sample's); anything that does not fit, or is empty, fails."""
    expected = torch.tensor([[100.0, 1.0], [2.0, 3.0]])
    buf = torch.full((2, 2), float("nan"))
    ids = list(range(8))
    fake = SimpleNamespace(
        windows={1: SimpleNamespace(ids=ids, runner=1)},
        sets={i: SimpleNamespace(expected=expected) for i in ids},
        pools={1: SimpleNamespace(outputs=[[buf]] * len(ids))},
        single=True, job=SimpleNamespace(tolerance="strict"), floor=0.0)
    fake._sample_agrees = functools.partial(Referee._sample_agrees, fake)
    samples = [_sample(0, [1, 1, 3], [1.005, 1.005, 3.0]),  # within 1e-4 * 100 + 1e-4 * 1
               _sample(1, [1], [1.02]),  # outside it
               _sample(2, [0], [float("nan")]),
               _sample(3, [4], [1.0]),  # no such element
               [4, 0, [1], "00"],  # not one element's bytes
               _sample(5, [], []),  # nothing sampled
               [6, 1, [1], struct.pack("f", 1.0).hex()],  # an output the call does not have
               ]  # call 7: no sample at all
    reply = Referee.sampled(fake, {"op": "sampled", "runner": 1,  # type: ignore[arg-type]
                                   "samples": samples})
    assert reply == {"agreed": [0]}
    assert Referee.sampled(fake, {"op": "sampled", "runner": 2,  # type: ignore[arg-type]
                                  "samples": samples}) == {"agreed": []}
