"""Regenerate ``examples/sessions/demo`` from a real headless run on this machine's CPU.

The model's replies come from the demo's own trace (served by the replay server), so the
demo replays the same replies each time; everything else is real: the built-in proposer,
gating, compiling, correctness checks and CPU timings.

    python examples/sessions/make_demo.py [--rounds 2] [--replies SOURCE] [--keep-tmp]

Only ``session.json``, ``trace.jsonl``, ``problem.py`` and ``candidates/`` are copied: the
session's git repository cannot be committed inside this one, so the demo is a trace-only
session (``cudal1-tui show`` reads its accepted candidate from the trace's decisions).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from cudal1_tui.replay import ReplayConfig, ReplayServer, Reply, load_replies

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "sessions" / "demo"
PROBLEM = "examples/diag_matmul.py"
DEMO_ID = "demo"
COPIED = ("session.json", "trace.jsonl", "problem.py")
NOTE = ("a recorded demo for `cudal1-tui serve-replay examples/sessions/demo`: real CPU "
        "timings, model replies replayed; regenerate with examples/sessions/make_demo.py")


def unique_replies(source: Path) -> tuple[list[Reply], str]:
    """The demo's model replies in first-seen order (a rerun records repeats), and its model."""
    book = load_replies(source)
    seen: set[str] = set()
    out: list[Reply] = []
    for reply in book.replies:
        if reply.content not in seen:
            seen.add(reply.content)
            out.append(reply)
    return out, book.model


def run_session(base_url: str, sessions: Path, rounds: int) -> Path:
    command = [sys.executable, "-m", "cudal1_tui", "run", PROBLEM, "--headless",
               "--rounds", str(rounds), "--sizes", "cpu", "--accept-best",
               "--base-url", base_url, "--sessions-dir", str(sessions)]
    subprocess.run(command, cwd=ROOT, check=True)
    [session] = [p for p in sessions.iterdir() if (p / "session.json").is_file()]
    return session


def check_complete(session: Path, rounds: int) -> None:
    """Every model slot recorded: a slot lost to an engine error must not become the demo."""
    meta = json.loads((session / "session.json").read_text(encoding="utf-8"))
    expected = rounds * int(meta.get("settings", {}).get("candidates_per_round", 1))
    lines = (session / "trace.jsonl").read_text(encoding="utf-8").splitlines()
    found = sum(1 for line in lines if line.strip()
                and json.loads(line).get("source") == "model")
    if found != expected:
        raise SystemExit(f"the run recorded {found} model candidates, not {expected}: "
                         "see the errors above; the demo was left as it was")


def portable_meta(meta: dict[str, Any]) -> dict[str, Any]:
    """No machine-specific paths in the committed demo."""
    meta["session_id"] = DEMO_ID
    meta["problem_path"] = PROBLEM
    meta.get("settings", {})["sessions_dir"] = ""
    meta.setdefault("extra", {})["note"] = NOTE
    return meta


def portable_trace(text: str) -> str:
    rows = []
    for line in text.splitlines():
        if line.strip():
            row = json.loads(line)
            if "session_id" in row:
                row["session_id"] = DEMO_ID
            rows.append(json.dumps(row, ensure_ascii=False))
    return "\n".join(rows) + "\n"


def install(session: Path, demo: Path) -> None:
    for name in COPIED:
        if not (session / name).is_file():
            raise SystemExit(f"the run left no {name} in {session}")
    meta = portable_meta(json.loads((session / "session.json").read_text(encoding="utf-8")))
    trace = portable_trace((session / "trace.jsonl").read_text(encoding="utf-8"))
    if demo.exists():
        shutil.rmtree(demo)
    demo.mkdir(parents=True)
    (demo / "session.json").write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n",
                                       encoding="utf-8")
    (demo / "trace.jsonl").write_text(trace, encoding="utf-8")
    shutil.copy2(session / "problem.py", demo / "problem.py")
    shutil.copytree(session / "candidates", demo / "candidates")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--demo", type=Path, default=DEMO, help="the folder to (re)write")
    parser.add_argument("--replies", type=Path, default=None,
                        help="where the model replies come from (default: the demo itself)")
    parser.add_argument("--keep-tmp", action="store_true", help="keep the temporary session")
    args = parser.parse_args(argv)
    # Read the replies before the demo is overwritten.
    replies, model = unique_replies(args.replies or args.demo)
    tmp = Path(tempfile.mkdtemp(prefix="cudal1-demo-"))
    try:
        config = ReplayConfig(replies=tuple(replies), model=model)
        with ReplayServer(config) as server:
            session = run_session(server.base_url, tmp / "sessions", args.rounds)
        check_complete(session, args.rounds)
        install(session, args.demo)
    finally:
        if args.keep_tmp:
            print(f"temporary session kept under {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"wrote {args.demo} from {session.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
