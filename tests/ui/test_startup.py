"""The first frame is drawn before the session opens; how fast is a benchmark's question.

``python benchmarks/startup.py`` prints the time to the first frame (median of runs); this
test checks only what it measures: the real executable draws a frame and reports it.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import startup


def test_first_frame_is_drawn_before_the_session_opens(problem_file: Path) -> None:
    from_spawn_ms, from_app_ms = startup.measure_once(problem_file)
    print(f"first frame: {from_spawn_ms:.0f} ms from spawn, {from_app_ms:.0f} ms from the app")
    assert from_app_ms >= 0.0 and from_spawn_ms >= from_app_ms
