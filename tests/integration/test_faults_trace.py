"""A trace write that fails mid-record (disk full, file too large) is cut back: no earlier or
later record is lost, and none is glued to a partial one.

The full disk is a file-size limit (RLIMIT_FSIZE) on a real child process appending through
the Session API: its write stops part-way into a record with EFBIG, as on a full disk.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from store_builders import populated_session

from cudal1_tui.store.trace import read_trace

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

CHILD = textwrap.dedent("""
    import resource, signal, sys
    sys.path[:0] = [{root!r}, {here!r}]
    from store_builders import record
    from cudal1_tui.errors import SessionError
    from cudal1_tui.store import Session

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG from write(), as a full disk gives
    session = Session.open({path!r})
    trace = session.path / "trace.jsonl"
    limit = trace.stat().st_size + 3000  # room for part of the next record only
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
    big = record(session, 3, 0, code="x = 1\\n" * 2000)  # ~12 KB: cannot fit
    try:
        session.append_candidate(big)
        print("written?!")
    except SessionError as exc:
        print("refused:", exc.message)
    print("size after the failure:", trace.stat().st_size)
    resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY,) * 2)  # space again
    later = record(session, 3, 1)
    session.append_candidate(later)
    print("later:", later.record_id)
    session.close()
""")


def test_a_failed_append_is_cut_back_and_the_next_record_is_whole(tmp_path: Path) -> None:
    session, records = populated_session(tmp_path / "sessions")
    session.close()
    trace = session.path / "trace.jsonl"
    before = trace.read_bytes()
    script = CHILD.format(root=str(ROOT), here=str(HERE), path=str(session.path))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "refused:" in done.stdout and "cut back to its last complete record" in done.stdout
    assert f"size after the failure: {len(before)}" in done.stdout
    later = done.stdout.split("later:")[1].strip()
    after = read_trace(trace)
    assert after.warnings == []  # no torn or glued line anywhere
    ids = [c.record_id for c in after.candidates]
    assert ids == [*(r.record_id for r in records.values()), later]
    assert trace.read_bytes().startswith(before)
    assert all(json.loads(line) for line in trace.read_text().splitlines())
