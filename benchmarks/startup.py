"""Time to the first frame of the real app: ``python benchmarks/startup.py [FILE] [-n N]``.

Each run starts the installed ``cudal1-tui FILE --measure-startup`` in a fresh process: the
app mounts headless, records the wall-clock time of its first frame and exits. Reported:
process spawn → first frame (what a user waits for: interpreter, imports, layout, first
paint), and app built → first frame. The session itself opens after the first frame, in a
worker, so neither number includes inspection or the probe.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LINE = re.compile(r"first frame: (\d+) ms after the app was built \(at ([\d.]+)\)")
DEFAULT_PROBLEM = Path(__file__).resolve().parent.parent / "examples" / "diag_matmul.py"
BUDGET_MS = 1000.0


def measure_once(problem: Path) -> tuple[float, float]:
    """(spawn → first frame ms, app built → first frame ms) of one fresh process."""
    exe = shutil.which("cudal1-tui")
    command = [exe] if exe else [sys.executable, "-m", "cudal1_tui"]
    with tempfile.TemporaryDirectory() as sessions:
        spawned = time.time()
        out = subprocess.run(
            [*command, str(problem), "--measure-startup", "--sessions-dir", sessions],
            capture_output=True, text=True, timeout=60, check=False,
        )
    match = LINE.search(out.stdout)
    if out.returncode != 0 or match is None:
        raise RuntimeError(f"the app did not report a first frame:\n{out.stdout}{out.stderr}")
    return (float(match.group(2)) - spawned) * 1000, float(match.group(1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problem", nargs="?", type=Path, default=DEFAULT_PROBLEM)
    parser.add_argument("-n", "--runs", type=int, default=5)
    args = parser.parse_args(argv)
    runs = [measure_once(args.problem) for _ in range(args.runs)]
    spawn = statistics.median(r[0] for r in runs)
    app = statistics.median(r[1] for r in runs)
    print(f"time to first frame (median of {args.runs}): {spawn:.0f} ms from process spawn, "
          f"{app:.0f} ms from app construction; budget {BUDGET_MS:.0f} ms")
    return 0 if spawn < BUDGET_MS else 1


if __name__ == "__main__":
    raise SystemExit(main())
