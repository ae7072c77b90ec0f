"""A problem's probe as a compiler-style failure, and the probe run before any screen opens.

A reference that raises, returns no tensor or barely depends on its inputs is reported like a
file that breaks the contract: ``file:LINE: error: …`` and exit code 1, by the app (before it
opens), ``run`` and ``eval`` alike. The app's early probe is the same job the session's
opening runs, and the judge remembers a passed probe, so it is not paid twice.
"""

from __future__ import annotations

import re
from pathlib import Path

from cudal1_evaluator.schema import ProbeResult
from cudal1_tui.config import Settings
from cudal1_tui.engine.device import resolve_device
from cudal1_tui.engine.jobs import probe_job
from cudal1_tui.errors import ProblemError
from cudal1_tui.judging import JUDGE
from cudal1_tui.problem.problem_file import read_source

PROBE_FIX = {
    "timeout": "cudal1-tui {path} --sizes cpu   # the reference is too slow here at full sizes",
    "device": "cudal1-tui {path} --device cpu   # a device torch can use",
}
DEFAULT_FIX = "cudal1-tui inspect {path}   # fix the file, then run it again"


def _located(path: Path, name: str, message: str) -> tuple[int, str]:
    """(the line in the user's file the probe's message points at, the message naming it)."""
    where = re.search(rf" at {re.escape(name)}\.py line (\d+)", message)
    shown = message.replace(f"{name}.py", str(path))
    return (int(where.group(1)) if where else 0), shown


def probe_failure(path: Path, name: str, result: ProbeResult) -> ProblemError:
    """The error for a probe that failed: compiler-style, its fix a command."""
    line, message = _located(path, name, result.message.strip().splitlines()[0]
                             if result.message.strip() else "no reason given")
    at = f"{path}:{line}" if line else str(path)
    fix = PROBE_FIX.get(result.error_kind, DEFAULT_FIX).format(path=path)
    return ProblemError(f"{at}: error: the probe of the reference failed "
                        f"({result.error_kind or 'error'}): {message}", fix=fix)


def preflight(path: Path, settings: Settings, sizes: str) -> ProblemError | None:
    """Probe ``path`` as the session will; the failure, or None when it passed."""
    from cudal1_tui.engine.opening import eval_source

    device = resolve_device(settings.device)
    source = eval_source(read_source(path), sizes, device)  # type: ignore[arg-type]
    result = JUDGE.probe(probe_job(settings, problem_source=source, problem_name=path.stem,
                                   device=device))
    return None if result.ok else probe_failure(path, path.stem, result)
