"""End-to-end verdicts on CPU: real worker subprocesses, real timing, real crashes."""

from __future__ import annotations

import os
import threading
import time

import pytest
from evaluator_cases import (
    DIAG_FAST,
    DIAG_PROBLEM,
    LINEAR_HONEST,
    LINEAR_PROBLEM,
    job,
    linear_candidate,
)

from cudal1_evaluator.launch import evaluate
from cudal1_evaluator.parent import pristine_cache
from cudal1_evaluator.schema import RewardSpec

HONEST_BODY = "        return torch.relu(self.fc(x))"


def codes(result: object) -> set[str]:
    return {f.code for f in result.flags}  # type: ignore[attr-defined]


def test_honest_candidate_is_ok_with_speedup_near_one() -> None:
    pristine_cache.clear()  # the "reference" stage times the reference alone, never reused here
    stages: list[str] = []
    result = evaluate(job(LINEAR_PROBLEM, LINEAR_HONEST),
                      on_progress=lambda stage, done, total, detail: stages.append(stage))
    assert result.status == "ok", result.message
    assert result.correct and len(result.trials) == 2 and all(t.ok for t in result.trials)
    assert result.trials[0].max_abs_err < 1e-4
    assert result.speedup is not None and 0.3 < result.speedup < 3.0
    assert result.reward == 0.0 or result.speedup >= 1.01
    assert {"reference", "candidate", "reference_pristine"} <= set(result.timing)
    cand = result.timing["candidate"]
    # one sample per trusted window: the parent's clock around it, per call
    assert cand.n >= 5 and len(cand.samples_ms) == cand.n and cand.clock == "trusted_window"
    assert cand.p10_ms <= cand.median_ms <= cand.p90_ms
    assert result.tolerance["preset"] == "strict"
    assert result.tolerance["by_dtype"]["float32"] == {"atol": 1e-4, "rtol": 1e-4,
                                                       "atol_scaled_by": "max|exp|"}
    assert result.tolerance["baseline_settings"] == {
        "cudnn.allow_tf32": False, "cuda.matmul.allow_tf32": False,
        "float32_matmul_precision": "highest"}
    assert result.device["type"] == "cpu" and result.versions["torch"]
    assert "gcc" in result.versions
    assert {"build", "correctness", "timing", "reference"} <= set(stages)
    assert not result.strict_reevaluation


def test_consecutive_candidates_share_one_pristine_measurement() -> None:
    from cudal1_evaluator.parent import pristine_cache

    pristine_cache.clear()
    first = evaluate(job(LINEAR_PROBLEM, LINEAR_HONEST))
    again = evaluate(job(LINEAR_PROBLEM, linear_candidate(HONEST_BODY)))
    assert first.status == "ok" and again.status == "ok", first.message + again.message
    assert "reference_pristine_reused" not in codes(first)
    reused = [f for f in again.flags if f.code == "reference_pristine_reused"]
    if "reference_pristine_remeasured" in codes(again):  # a busy host: taken, then redone
        assert not reused
    else:
        assert reused and reused[0].severity == "info"
        assert again.timing["reference_pristine"] == first.timing["reference_pristine"]
    strict = evaluate(job(LINEAR_PROBLEM, LINEAR_HONEST, strict=True))
    assert "reference_pristine_reused" not in codes(strict)  # strict passes measure afresh


def test_a_candidate_turning_tf32_on_is_reported_and_judged_by_tolerance() -> None:
    header = "torch.backends.cudnn.allow_tf32 = True\ntorch.backends.cuda.matmul.allow_tf32 = True"
    result = evaluate(job(LINEAR_PROBLEM, linear_candidate(HONEST_BODY, header)))
    assert result.status == "ok", result.message  # no TF32 on a CPU: same numbers
    # the baseline is PyTorch's defaults: cuDNN TF32 is on already, matmul TF32 is the change
    assert result.settings_changed["cuda.matmul.allow_tf32"] == {"before": False, "after": True}
    assert "cudnn.allow_tf32" not in result.settings_changed


def test_diagonal_matmul_rewrite_is_a_real_speedup_and_survives_strict_mode() -> None:
    result = evaluate(job(DIAG_PROBLEM, DIAG_FAST, strict_threshold=3.0))
    assert result.status == "ok", result.message
    assert result.speedup is not None and result.speedup > 5
    assert result.strict_reevaluation and len(result.trials) == 6
    assert result.reward > 0 and result.reward_formula == "clipped_speedup"


def test_wrong_output_is_incorrect_and_stdout_cannot_forge_a_verdict() -> None:
    body = ('        print(\'{"status": "ok", "speedup": 100.0, "correct": true}\')\n'
            "        return torch.relu(self.fc(x)) + 1e-2")
    result = evaluate(job(LINEAR_PROBLEM, linear_candidate(body)))
    assert result.status == "incorrect"
    assert result.reward == 0.0 and not result.correct
    assert not result.trials[0].ok and result.trials[0].max_abs_err > 1e-3
    assert "outside atol" in result.message


def test_exception_in_forward_is_a_runtime_error() -> None:
    body = '        raise ValueError("kaboom in forward")'
    result = evaluate(job(LINEAR_PROBLEM, linear_candidate(body)))
    assert result.status == "runtime_error"
    assert "kaboom in forward" in result.message and result.reward == 0.0


def test_segfault_is_a_runtime_error_naming_the_signal() -> None:
    # faulthandler raises a real SIGSEGV; os.kill itself is refused by the runtime guard
    body = "        import faulthandler\n        faulthandler._sigsegv()"
    result = evaluate(job(LINEAR_PROBLEM, linear_candidate(body)))
    assert result.status == "runtime_error"
    assert "SIGSEGV" in result.message and "segmentation fault" in result.message


def test_hang_is_a_timeout_within_the_limit() -> None:
    body = "        while True:\n            pass"
    started = time.monotonic()
    result = evaluate(job(LINEAR_PROBLEM, linear_candidate(body), timeout_s=10.0))
    assert result.status == "timeout"
    assert "timed out after 10 s" in result.message
    assert time.monotonic() - started < 25


def test_cancel_kills_the_evaluation_and_says_so() -> None:
    body = "        while True:\n            pass"
    cancel = threading.Event()
    threading.Timer(3.0, cancel.set).start()
    started = time.monotonic()
    result = evaluate(job(LINEAR_PROBLEM, linear_candidate(body), timeout_s=120.0), cancel=cancel)
    assert result.status == "timeout" and result.message == "cancelled"
    assert time.monotonic() - started < 15


@pytest.mark.parametrize("body", [
    "        big = torch.ones(2**31, dtype=torch.float32)  # 8 GiB > the 6 GiB limit\n"
    "        return torch.relu(self.fc(x)) + big[0]",
    "        big = torch.empty(1 << 41, dtype=torch.uint8)\n        return big",
])
def test_huge_allocation_is_a_runtime_error_about_memory(body: str) -> None:
    result = evaluate(job(LINEAR_PROBLEM, linear_candidate(body)))
    assert result.status == "runtime_error"
    assert "out of memory" in result.message


def test_the_candidate_never_sees_the_users_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    real_home = os.path.expanduser("~")
    monkeypatch.setenv("OPENAI_API_KEY", "sekrit")
    monkeypatch.setenv("HF_TOKEN", "sekrit")
    monkeypatch.setenv("MY_DB_PASSWORD", "sekrit")
    body = ('        seen = [k for k, v in os.environ.items() if "sekrit" in v]\n'
            "        if seen:\n"
            '            raise RuntimeError(f"saw secrets: {seen}")\n'
            f'        if os.environ["HOME"] == {real_home!r}:\n'
            '            raise RuntimeError("the real home directory")\n'
            "        return torch.relu(self.fc(x))")
    result = evaluate(job(LINEAR_PROBLEM, linear_candidate(body)))
    assert result.status == "ok", result.message


def test_unwritten_empty_output_reads_poison_not_the_reference() -> None:
    body = ("        ref_like = torch.relu(self.fc(x))\n"
            "        del ref_like\n"
            "        return torch.empty(x.shape[0], self.fc.out_features)")
    result = evaluate(job(LINEAR_PROBLEM, linear_candidate(body)))
    assert result.status == "incorrect" and result.reward == 0.0


def test_input_mutation_is_flagged_and_rejected() -> None:
    body = "        out = torch.relu(self.fc(x))\n        x.mul_(2.0)\n        return out"
    result = evaluate(job(LINEAR_PROBLEM, linear_candidate(body)))
    assert result.status == "rejected" and result.reward == 0.0
    assert "input_mutation" in codes(result)


FREEING = linear_candidate(
    "        out = torch.relu(self.fc(x))\n"
    "        if getattr(self, 'last', None) is not None:\n"
    "            self.last.untyped_storage().resize_(0)\n"
    "        self.last = out\n"
    "        return out")


def test_an_output_freed_by_the_next_call_is_rejected_with_its_speedup() -> None:
    """CUDA graph trees (torch.compile's reduce-overhead) free a held output's memory at the
    next replay; here the candidate shrinks the last output's storage on each call. Every
    output was copied out and checked before the next call, so the measured speedup stands
    and is shown; under the default reward policy (static_outputs: zero) it earns nothing,
    because a caller holding two results gets garbage."""
    result = evaluate(job(LINEAR_PROBLEM, FREEING))
    assert result.status == "rejected" and result.correct, result.message
    flag = next(f for f in result.flags if f.code == "output_buffer_reused")
    assert flag.severity == "reject" and "clone the output" in flag.reason
    assert result.speedup is not None and result.speedup > 0
    assert result.message.startswith(f"{result.speedup:.3g}x, rejected: output_buffer_reused")
    assert result.reward == 0.0
    assert result.reward_policy == {"static_outputs": "zero", "fallback": "full"}


def test_the_reward_policy_can_pay_static_outputs_in_full() -> None:
    paid = job(LINEAR_PROBLEM, FREEING,
               reward=RewardSpec(policy={"static_outputs": "full"}))
    result = evaluate(paid)
    assert result.status == "ok", result.message
    flag = next(f for f in result.flags if f.code == "output_buffer_reused")
    assert flag.severity == "warn" and result.speedup is not None
    assert result.reward_policy["static_outputs"] == "full"


def test_an_unknown_reward_policy_is_the_callers_mistake() -> None:
    with pytest.raises(ValueError, match="static_outputs"):
        evaluate(job(LINEAR_PROBLEM, FREEING,
                     reward=RewardSpec(policy={"static_outputs": "half"})))


def test_every_candidate_call_runs_without_autograd() -> None:
    """The correctness calls too: the candidate's own settings, restored before each call,
    once turned grad mode back on inside the harness's no_grad (TorchScript then specialised
    on autograd and never fused; CUDA graph trees kept every output for a backward)."""
    body = ("        if torch.is_grad_enabled():\n"
            "            raise RuntimeError('called with autograd on')\n"
            "        return torch.relu(self.fc(x))")
    result = evaluate(job(LINEAR_PROBLEM, linear_candidate(body)))
    assert result.status == "ok", result.message
    assert result.correct and len(result.trials) == 2


def test_a_call_count_cache_fails_the_timed_recheck() -> None:
    header = "_calls = [0]"
    body = ("        _calls[0] += 1\n"
            "        if _calls[0] > 4:  # correct during the 2 trials x 2 calls, then cached\n"
            "            return torch.zeros(x.shape[0], self.fc.out_features)\n"
            "        return torch.relu(self.fc(x))")
    result = evaluate(job(LINEAR_PROBLEM, linear_candidate(body, header)))
    assert result.status == "incorrect" and result.reward == 0.0
    assert all(t.ok for t in result.trials)
    assert "timed_output_mismatch" in codes(result)


def test_a_patched_torch_op_that_slows_the_reference_is_rejected() -> None:
    header = ("import time\n_relu = torch.relu\n\n\n"
              "def _slow_relu(*args, **kwargs):\n    time.sleep(0.003)\n"
              "    return _relu(*args, **kwargs)\n\n\ntorch.relu = _slow_relu\n")
    body = "        return torch.clamp_min(self.fc(x), 0.0)"
    result = evaluate(job(LINEAR_PROBLEM, linear_candidate(body, header)))
    assert result.status == "rejected" and result.reward == 0.0
    rejects = {f.code for f in result.flags if f.severity == "reject"}
    assert rejects  # reference_slowed here, or an integrity flag once the guard catches it first
    if "reference_slowed" in rejects:
        timing = result.timing
        assert timing["reference"].median_ms > 1.15 * timing["reference_pristine"].median_ms


def test_a_forged_verdict_on_every_fd_is_detected() -> None:
    header = ("for _fd in [int(n) for n in os.listdir('/proc/self/fd') if int(n) > 2]:\n"
              "    try:\n"
              "        os.write(_fd, b'{\"body\": \"{}\", \"mac\": \"00\"}\\n')\n"
              "    except OSError:\n"
              "        pass\n")
    result = evaluate(job(LINEAR_PROBLEM, linear_candidate(HONEST_BODY, header)))
    assert result.status != "ok" and result.reward == 0.0
    assert "verdict_channel_tampered" in codes(result)


def test_probe_runs_isolated_and_reports_a_crash_as_a_result() -> None:
    from cudal1_evaluator.launch import probe
    from cudal1_evaluator.schema import ProbeJob

    good = probe(ProbeJob(problem_source=LINEAR_PROBLEM, timing_budget_s=0.3))
    assert good.ok, good.message
    assert [t.shape for t in good.inputs] == [[64, 128]]
    crash = LINEAR_PROBLEM.replace("return [torch.randn(batch, d_in)]",
                                   "import faulthandler\n    faulthandler._sigsegv()")
    bad = probe(ProbeJob(problem_source=crash, timing_budget_s=0.3))
    assert not bad.ok and bad.error_kind == "crash" and "SIGSEGV" in bad.message
    hang = LINEAR_PROBLEM.replace("return [torch.randn(batch, d_in)]", "while True:\n        pass")
    slow = probe(ProbeJob(problem_source=hang, timeout_s=8.0))
    assert not slow.ok and slow.error_kind == "timeout"



def test_a_stall_at_the_start_is_not_taken_off_the_reference_alone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The start's empty windows stalled (another process creating its context on the GPU,
    say): their hand-off, taken off every alone window as it stood then, made the reference
    alone read half its time, and the speedup was taken against that. The alone windows take
    the median of the empty windows that follow each of them instead."""
    from cudal1_evaluator.parent import conduct

    stall_ms = 400.0
    empty_windows = conduct.Conductor._empty_windows

    def stalled(self: conduct.Conductor, count: int) -> None:
        empty_windows(self, count)
        if count == conduct.EMPTY_WINDOWS:  # the start's (later ones come one at a time)
            self.ev.handoff[-count:] = [ms + stall_ms for ms in self.ev.handoff[-count:]]

    monkeypatch.setattr(conduct.Conductor, "_empty_windows", stalled)
    pristine_cache.clear()  # a fresh alone measurement
    result = evaluate(job(LINEAR_PROBLEM, LINEAR_HONEST))
    assert result.status == "ok", result.message
    # What each alone window had taken off, as cached for the next evaluation. Before the
    # fix it was the stalled start's median (over 400 ms, then capped at half the wall, so
    # the reference alone read half its time); a ratio of medians on a busy CPU was too
    # noisy to tell that apart, the hand-off itself is not.
    [(_key, (_at, bursts))] = pristine_cache._entries.items()
    assert bursts and all(b.handoff_ms < stall_ms / 4 for b in bursts), \
        [b.handoff_ms for b in bursts]
    pristine_cache.clear()


def test_an_alone_baseline_measured_again_after_the_candidate_ran_is_never_cached() -> None:
    """A reused alone measurement that looks too fast is measured again, after the candidate's
    code has run: whatever it left behind (memory held, kernels queued in an untimed request)
    would become every later evaluation's baseline if that measurement were cached."""
    from dataclasses import replace

    pristine_cache.clear()
    first = evaluate(job(LINEAR_PROBLEM, LINEAR_HONEST))
    assert first.status == "ok", first.message
    [(key, (_at, bursts))] = pristine_cache._entries.items()
    too_fast = [replace(b, wall_ms=b.wall_ms / 4, handoff_ms=b.handoff_ms / 4) for b in bursts]
    pristine_cache.put(key, too_fast)
    again = evaluate(job(LINEAR_PROBLEM, linear_candidate(HONEST_BODY)))
    assert again.status == "ok", again.message
    assert "reference_pristine_remeasured" in codes(again)
    found = pristine_cache.get(key)
    assert found is not None and found[0] is too_fast  # not the one measured after the candidate
    pristine_cache.clear()


def test_the_once_cost_estimate_runs_end_to_end_and_travels_with_the_alone_windows() -> None:
    """``window_cost="alone_intercept"`` (opt-in): the alone phase adds windows of one call
    and empty ones; an honest candidate stays ok, and a second evaluation of the problem reuses
    the alone windows with their once cost (or measures them again on a busy host)."""
    pristine_cache.clear()
    first = evaluate(job(LINEAR_PROBLEM, LINEAR_HONEST, window_cost="alone_intercept"))
    again = evaluate(job(LINEAR_PROBLEM, linear_candidate(HONEST_BODY),
                         window_cost="alone_intercept"))
    assert first.status == "ok" and again.status == "ok", first.message + again.message
    assert first.speedup and again.speedup
    assert {"reference_pristine_reused", "reference_pristine_remeasured"} & codes(again)
    plain = evaluate(job(LINEAR_PROBLEM, LINEAR_HONEST))  # its own alone windows: keyed apart
    assert "reference_pristine_reused" not in codes(plain)
    pristine_cache.clear()
