"""Where a window's calls' time goes now that their sets are released one call at a time
(``cudal1_evaluator/parent/release.py``): per side, per call (medians over the timed
windows): the window's wall time, the request's round trip as the parent timed it, the
runner's own account of its call, the trusted step after it (host: outputs read in; GPU: the
referee's sample and next copy), what was credited back, and the per-call time the window
finally reads (``Burst.mean_ms``).

    python benchmarks/release_diag.py PROBLEM CANDIDATE [DEVICE]
    python benchmarks/release_diag.py --gpu-60x        # the 60x test's problem (CUDA)

It wraps the parent's own window methods (trusted code, this process only).
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path
from typing import Any

from cudal1_evaluator import launch
from cudal1_evaluator.parent import conduct, release
from cudal1_evaluator.schema import Job

rows: list[dict[str, Any]] = []
_timed: list[release.Released] = []


def _wrap_released(method: Any) -> Any:
    def wrapper(self: conduct.Conductor, side: str, values: Any, sets: Any, copy: bool,
                timed: release.Released, noop: bool = False) -> Any:
        word = method(self, side, values, sets, copy, timed, noop)
        if not noop:
            _timed.append(timed)
        else:
            rows.append({"side": "noop", "calls": len(values), "requests": timed.requests})
        return word
    return wrapper


def _wrap_window(method: Any) -> Any:
    def wrapper(self: conduct.Conductor, side: str, ids: list[int]) -> Any:
        before = len(_timed)
        burst = method(self, side, ids)
        timed = _timed[-1] if len(_timed) > before else release.Released()
        rows.append({"side": side, "calls": burst.calls, "wall": burst.wall_ms,
                     "handoff": burst.handoff_ms, "released": burst.released_ms,
                     "mean": burst.mean_ms(), "requests": timed.requests,
                     "steps": timed.steps})
        return burst
    return wrapper


loops: dict[str, list[dict[str, float]]] = {}


def _wrap_request(method: Any) -> Any:
    """The runner's own account of each call (``loop_ms``: diagnostics, never believed)."""
    def wrapper(self: conduct.Conductor, side: str, message: Any, fds: Any = ()) -> Any:
        reply = method(self, side, message, fds)
        if isinstance(reply, dict) and isinstance(reply.get("loop_ms"), dict):
            key = "noop" if message.get("noop") else side
            loops.setdefault(key, []).append(reply["loop_ms"])
        return reply
    return wrapper


def _med(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def main() -> None:
    if sys.argv[1:2] == ["--gpu-60x"]:
        sys.path[:0] = ["tests/evaluator", "."]
        from tests.evaluator.test_evaluator_gpu import BROADCAST, DIAG_GPU
        problem, candidate, device = DIAG_GPU, BROADCAST, "cuda"
    else:
        problem, candidate = (Path(p).read_text() for p in sys.argv[1:3])
        device = sys.argv[3] if len(sys.argv) > 3 else "cpu"
    conduct.Conductor.ACCOUNT_LOOP = "times"  # the runners' own clock on their calls
    conduct.Conductor._request = _wrap_request(conduct.Conductor._request)  # type: ignore[method-assign]
    conduct.Conductor._released = _wrap_released(conduct.Conductor._released)  # type: ignore[method-assign]
    conduct.Conductor._window = _wrap_window(conduct.Conductor._window)  # type: ignore[method-assign]
    result = launch.evaluate(Job(problem_source=problem, candidate_source=candidate,
                                 device=device, timing_budget_s=2.0, profile=False))
    print(result.status, f"{result.speedup or 0:.3f}x", result.message.splitlines()[0])
    for side, summary in result.timing.items():
        print(f"  {side:22s} median {summary.median_ms:.4f} ms (n={summary.n})")
    noop = [ms for r in rows if r["side"] == "noop" for ms in r["requests"]]
    print(f"no-op requests (the reference runner's hand-over alone): n={len(noop)} "
          f"median {_med(noop):.4f} ms")
    print(f"{'side':10s} {'windows':>7s} {'calls':>5s} {'wall/call':>9s} {'request':>8s} "
          f"{'step':>7s} {'handoff/c':>9s} {'credit/c':>8s} {'mean_ms':>8s}")
    for side in ("reference", "candidate"):
        mine = [r for r in rows if r["side"] == side and r["calls"]]
        if not mine:
            continue
        def per(key: str, mine: list[dict[str, Any]] = mine) -> float:
            return _med([r[key] / r["calls"] for r in mine])
        print(f"{side:10s} {len(mine):7d} {_med([r['calls'] for r in mine]):5.0f} "
              f"{per('wall'):9.4f} {_med([m for r in mine for m in r['requests']]):8.4f} "
              f"{_med([m for r in mine for m in r['steps']]):7.4f} {per('handoff'):9.4f} "
              f"{per('released'):8.4f} {_med([r['mean'] for r in mine]):8.4f}")


    for side, items in loops.items():
        keys = sorted({k for item in items for k in item})
        print(f"runner's own account, {side} (median ms a request): " + ", ".join(
            f"{k} {_med([float(i.get(k, 0.0)) for i in items]):.4f}" for k in keys))


if __name__ == "__main__":
    main()
