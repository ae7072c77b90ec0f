"""With the model server sharing the timing device, no timed evaluation overlaps a generation.

End to end on CPU: the replay server streams two replies (a short one, a long one), real
evaluator subprocesses judge the candidates, and ``wait_for_model = "always"`` puts the
engine's gate on the CPU lane as ``auto`` does on a GPU the server uses. The session's own
``events.jsonl`` is the evidence; ``never`` is the control that shows the log catches an
overlap when there is one.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from engine_events import Events

from cudal1_tui.config import Settings
from cudal1_tui.engine.engine import Engine
from cudal1_tui.engine.events import CandidateFinished, EngineError, StageChanged
from cudal1_tui.engine.gpu_share import timing_waits
from cudal1_tui.replay import ReplayConfig, ReplayServer, Reply
from cudal1_tui.store.event_log import overlaps, read_events

ROOT = Path(__file__).resolve().parents[2]
PROBLEM = ROOT / "examples" / "diag_matmul.py"

CODE = textwrap.dedent('''\
    ```python
    import torch
    import torch.nn as nn


    class ModelNew(nn.Module):
        def __init__(self):
            super().__init__()

        def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return a.unsqueeze(-1) * b
    ```
    ''')


def reply(analysis_chars: int) -> Reply:
    analysis = ("The reference materialises diag(a) and runs a dense GEMM. " * 200)
    return Reply("## Performance Analysis\n" + analysis[:analysis_chars] + "\n\n"
                 "## Algorithm Design\nA broadcast multiply.\n\n## Code Implementation\n" + CODE)


# ~0.3 s for the short reply, ~3 s for the long one (24 characters a chunk, 10 ms apart)
REPLIES = (reply(100), reply(7000))


def settings_for(tmp: Path, base_url: str, wait: str) -> Settings:
    values: dict[str, Any] = dict(
        base_url=base_url, sessions_dir=str(tmp / "sessions"), build_dir=str(tmp / "build"),
        device="cpu", correctness_trials=2, timing_budget_s=0.5, eval_timeout_s=120.0,
        strict_threshold=1e6, connect_timeout_s=2.0, request_timeout_s=60.0, retries=0,
        candidates_per_round=2, use_builtin=False, memory_limit_mb=4096,
        wait_for_model=wait)
    return Settings(**values)


def run_round(tmp: Path, wait: str) -> tuple[Events, list[Any]]:
    events = Events()
    with ReplayServer(ReplayConfig(replies=REPLIES, latency_s=0.01)) as server:
        engine = Engine(PROBLEM, settings_for(tmp, server.base_url, wait), emit=events,
                        sizes="cpu")
        engine.open()
        try:
            engine.run_round()
            path = Path(engine.session_path or "")
        finally:
            engine.close()
    return events, read_events(path / "events.jsonl")


def spans(rows: list[Any], kind: str) -> int:
    return sum(1 for r in rows if r["event"] == f"{kind}_started")


def test_shared_device_timing_never_overlaps_generation(tmp_path: Path) -> None:
    events, rows = run_round(tmp_path, "always")
    finished = events.of(CandidateFinished)
    assert len(finished) == 2 and all(e.status != "rejected" for e in finished), finished
    assert rows[0]["event"] == "server_gpus" and rows[0]["shared"] == ["cpu"]
    assert spans(rows, "generation") == 2 and spans(rows, "timing") == 2
    assert overlaps(rows) == []
    # the short reply's candidate was ready while the long one streamed: it waited, and said so
    waits = [e for e in events.of(StageChanged) if e.detail == timing_waits("cpu")]
    assert waits and waits[0].stage == "verifying"
    first_timing = next(i for i, r in enumerate(rows) if r["event"] == "timing_started")
    assert [r["event"] for r in rows[1:first_timing]].count("generation_ended") == 2
    notes = [e.message for e in events.of(EngineError) if e.severity == "info"]
    assert any(n.startswith("wait_for_model = always") for n in notes)


def test_without_the_gate_the_log_shows_the_overlap(tmp_path: Path) -> None:
    events, rows = run_round(tmp_path, "never")
    assert len(events.of(CandidateFinished)) == 2
    assert spans(rows, "timing") == 2
    assert overlaps(rows), rows  # the short reply's candidate is timed while the long one streams
    assert not [e for e in events.of(StageChanged) if e.detail == timing_waits("cpu")]
