"""Where a trusted window's time goes (parent side): fill, the runner's request, the seal, per
window, for one evaluation. ``python benchmarks/window_diag.py PROBLEM CANDIDATE [DEVICE]
[DIVISOR]``: DIVISOR, when given, sizes a window's sets at that fraction of the free device
memory (1/DIVISOR) instead of the evaluator's own share, to see how the windows' memory moves
the per-call times; the device's peak memory in use is printed (``nvidia-smi``, polled).

It wraps the parent's own request methods (trusted code, this process only) to time each
step, and prints one line per window and the calls per window chosen.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from cudal1_evaluator import launch
from cudal1_evaluator.parent import conduct
from cudal1_evaluator.schema import Job

steps: list[tuple[str, str, float]] = []
seals: list[dict[str, Any]] = []
loops: dict[str, list[tuple[int, dict[str, float]]]] = {}
windows: list[tuple[str, int, float, dict[str, float]]] = []  # side, calls, wall, steps


def _timed_window(method: Any) -> Any:
    """Each window's wall time and the round trips inside it (fill, flush, burst, seal)."""
    def wrapper(self: conduct.Conductor, side: str, ids: list[int]) -> Any:
        first = len(steps)
        burst = method(self, side, ids)
        inside = {op.split(":")[-1]: ms for _name, op, ms in steps[first:]}
        windows.append((side, len(ids), burst.wall_ms, inside))
        return burst
    return wrapper


def _window_table() -> None:
    """Medians per kind of window: the empty ones are the hand-off taken off the others."""
    kinds: dict[tuple[str, int], list[tuple[float, dict[str, float]]]] = {}
    for side, calls, wall, inside in windows:
        kinds.setdefault((side, calls), []).append((wall, inside))
    print(f"{'window':24s} {'n':>3s} {'wall ms':>9s} {'burst rt':>9s} {'seal rt':>9s} "
          f"{'wall-burst-seal':>15s}")
    for (side, calls), items in sorted(kinds.items()):
        def med(key: str, items: list[tuple[float, dict[str, float]]] = items) -> float:
            return statistics.median(i.get(key, 0.0) for _w, i in items)
        wall = statistics.median(w for w, _i in items)
        print(f"{side + ' x' + str(calls):24s} {len(items):3d} {wall:9.3f} {med('burst'):9.3f} "
              f"{med('seal'):9.3f} {wall - med('burst') - med('seal'):15.3f}")


def _timed(name: str, method: Any) -> Any:
    def wrapper(self: conduct.Conductor, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            reply = method(self, *args, **kwargs)
            if name == "referee" and isinstance(reply, dict) and "in_place" in reply:
                seals.append(reply)
            if name == "runner" and isinstance(reply, dict) and "loop_ms" in reply:
                loops.setdefault(str(args[0]), []).append(
                    (len(reply.get("where") or []), reply["loop_ms"]))
            return reply
        finally:
            op = f"{args[0]}:" if name == "runner" and args else ""
            for a in args:
                if isinstance(a, dict):
                    op += str(a.get("op", ""))
            steps.append((name, op, (time.perf_counter() - started) * 1e3))
    return wrapper


def _poll_memory(stop: threading.Event, peak: list[int]) -> None:
    """The device's memory in use (MiB, every process), its peak kept in ``peak[0]``."""
    while not stop.wait(0.25):
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used,memory.total",
                                  "--format=csv,noheader,nounits", "-i", "0"],
                                 capture_output=True, text=True, timeout=5).stdout
            used, total = (int(x) for x in out.split(",")[:2])
        except (OSError, ValueError, subprocess.SubprocessError):
            return
        peak[0], peak[1] = max(peak[0], used), total


def main() -> None:
    problem, candidate = (Path(p).read_text() for p in sys.argv[1:3])
    device = sys.argv[3] if len(sys.argv) > 3 else "cpu"
    if len(sys.argv) > 4:
        divisor = int(sys.argv[4])
        conduct.window_bytes = lambda dev, free: (  # type: ignore[assignment]
            conduct.WINDOW_BYTES["cpu"] if not dev.startswith("cuda")
            else max(conduct.WINDOW_BYTES["cuda"], free // divisor))
    peak = [0, 0]
    stop = threading.Event()
    if device.startswith("cuda"):
        threading.Thread(target=_poll_memory, args=(stop, peak), daemon=True).start()
    conduct.Conductor.ACCOUNT_LOOP = True  # the runners' own account of their loops
    conduct.Conductor._ask_referee = _timed("referee", conduct.Conductor._ask_referee)  # type: ignore[method-assign]
    conduct.Conductor._ask_runner = _timed("runner", conduct.Conductor._ask_runner)  # type: ignore[method-assign]
    conduct.Conductor._window = _timed_window(conduct.Conductor._window)  # type: ignore[method-assign]
    result = launch.evaluate(Job(problem_source=problem, candidate_source=candidate,
                                 device=device, timing_budget_s=3.0, profile=False))
    stop.set()
    print(result.status, result.speedup, result.message.splitlines()[0])
    if peak[1]:
        print(f"device memory in use at most {peak[0]} MiB of {peak[1]} MiB")
    by: dict[str, list[float]] = {}
    for name, op, ms in steps:
        by.setdefault(f"{name}:{op}", []).append(ms)
    for key, values in sorted(by.items()):
        print(f"{key:22s} n={len(values):4d} median {statistics.median(values):8.3f} ms "
              f"max {max(values):8.3f} ms")
    if seals:
        print("last seals (outputs read in place / copied / driver error / newly mapped):",
              [(r.get("in_place"), r.get("copied"), r.get("map_error"), r.get("mapped"))
               for r in seals[-6:]])
        print("allocations mapped by all seals:", sum(int(r.get("mapped") or 0) for r in seals))
    for side, items in loops.items():
        for calls, spent in items[-3:]:
            per = {k: round(v / max(calls, 1), 4) for k, v in spent.items()}
            print(f"runner {side}: {calls} calls, the runner's own ms per call {per}; "
                  f"in all {spent}")
    _window_table()
    for side, summary in result.timing.items():
        samples = [round(x, 3) for x in summary.samples_ms]
        print(side, summary.n, round(summary.median_ms, 4), samples)


if __name__ == "__main__":
    main()
