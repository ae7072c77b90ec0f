"""``cudal1-tui eval PROBLEM CANDIDATE``: evaluate one candidate, print the result.

Exit codes: 0 the candidate is verified (status ``ok``), 1 it is not (compile error,
runtime error, incorrect, timeout, rejected), 2 bad usage (a missing file, a bad flag).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from cudal1_evaluator.schema import TOLERANCES, Job, Result
from cudal1_tui.cli.reporting import report
from cudal1_tui.config import Settings
from cudal1_tui.engine import lane_process
from cudal1_tui.engine.device import resolve_device
from cudal1_tui.errors import ConfigError, ProblemError
from cudal1_tui.judging import JUDGE
from cudal1_tui.present.verdict_text import verdict_details
from cudal1_tui.uncertainty import interval_text, machine_busy, noise_warning, precision_text

NAME = "eval"
NOT_OK = 1
USAGE_ERROR = 2


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(NAME, help="evaluate one candidate against a problem")
    parser.add_argument("problem", type=Path, help="the reference problem file")
    parser.add_argument("candidate", type=Path, help="a module defining ModelNew")
    parser.add_argument("--device", default="cpu",
                        help="cpu, cuda, cuda:N or auto (a GPU if torch sees one; default cpu)")
    parser.add_argument("--sizes", choices=("auto", "cpu", "full"), default="auto",
                        help="problem sizes: the file's (full), its `# cpu-sizes:` (cpu), or "
                        "cpu sizes on a CPU device and full ones on a GPU (auto, the default)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--tolerance", default="strict", choices=TOLERANCES)
    parser.add_argument("--trials", type=int, default=5, help="correctness trials")
    parser.add_argument("--budget", type=float, default=10.0, help="timing budget, seconds")
    parser.add_argument("--timeout", type=float, default=300.0, help="wall-clock limit, seconds")
    parser.add_argument("--torch-compile", action="store_true",
                        help="also time torch.compile of the reference")
    parser.add_argument("--build-dir", type=Path, default=None, help="build cache directory")
    parser.set_defaults(handler=run)
    parser.epilog = "exit codes: 0 verified (ok), 1 not ok, 2 bad usage"


class _Usage(Exception):
    pass


def _read(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise _Usage(f"the {what} file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise _Usage(f"cannot read the {what} file {path}: {exc}") from None


def _sized(source: str, args: argparse.Namespace, device: str) -> str:
    """The problem at the sizes asked for: ``auto`` shrinks on a CPU device only."""
    if args.sizes == "full" or (args.sizes == "auto" and device != "cpu"):
        return source
    from cudal1_tui.errors import ProblemError
    from cudal1_tui.problem.sizing import shrink_for_cpu

    try:
        return shrink_for_cpu(source)
    except ProblemError as exc:
        raise _Usage(f"{args.problem}: {exc.message}") from None


def _build_dir(args: argparse.Namespace) -> str:
    if args.build_dir is not None:
        return str(args.build_dir.expanduser())
    try:
        from cudal1_tui.config import build_dir, load_settings

        return str(build_dir(load_settings().settings))
    except Exception:  # a broken config file must not stop a one-off evaluation
        return ""


def _device(requested: str) -> str:
    try:
        return resolve_device(requested)
    except ConfigError as exc:
        raise _Usage(exc.message) from None


def _job(args: argparse.Namespace) -> Job:
    device = _device(args.device)
    if args.trials < 1 or args.budget <= 0 or args.timeout <= 0:
        raise _Usage("--trials must be >= 1, --budget and --timeout > 0")
    return Job(
        problem_source=_sized(_read(args.problem, "problem"), args, device),
        candidate_source=_read(args.candidate, "candidate"),
        device=device,
        problem_name=args.problem.stem,
        job_id=args.candidate.stem,
        correctness_trials=args.trials,
        tolerance=args.tolerance,
        timing_budget_s=args.budget,
        timeout_s=args.timeout,
        compare_torch_compile=args.torch_compile,
        build_dir=_build_dir(args) or None,
    )


def judge(job: Job, console: Console | None = None) -> Result:
    """Static gate first; the isolated evaluation only when nothing is rejected."""
    if console is None:
        return JUDGE.judge(job)
    with console.status("evaluating…") as status:
        return JUDGE.judge(job, on_progress=lambda stage, done, total, detail: status.update(
            f"{stage} {done}/{total} {detail}".rstrip()))


def _print_summary(result: Result, console: Console) -> None:
    colour = "green" if result.ok else "red"
    speed = precision_text(result, result.speedup) if result.speedup else "-"
    interval = interval_text(result)
    speed += f" (p10–p90 {interval})" if interval else ""
    console.print(f"[bold {colour}]{result.status}[/]  speedup {speed}  reward "
                  f"{result.reward:.3g} ({result.reward_formula})", highlight=False)
    for warning in (noise_warning(result), machine_busy()):
        if warning:
            console.print(f"[yellow]warning:[/] {warning}", highlight=False)
    if result.timing:
        table = Table("timing", "median ms", "p10", "p90", "n", box=None)
        for name, t in result.timing.items():
            table.add_row(name, f"{t.median_ms:.4g}", f"{t.p10_ms:.4g}", f"{t.p90_ms:.4g}",
                          str(t.n))
        console.print(table)
    details = verdict_details(result, compile_tail=None)
    if details:
        console.print(details, highlight=False)


def reference_failed(result: Result) -> bool:
    """Whether a failed verdict may be the problem's fault: the reference raised, or the
    evaluation ended without a verdict before the candidate was tried."""
    message = result.message
    return result.status == "runtime_error" and not result.trials and (
        "the reference failed" in message or "without a verdict" in message)


def _problem_failure(args: argparse.Namespace, job: Job) -> ProblemError | None:
    """The probe's compiler-style error when the problem itself fails, else None."""
    from cudal1_tui.engine.jobs import probe_job
    from cudal1_tui.engine.preflight import probe_failure

    probe = JUDGE.probe(probe_job(Settings(), problem_source=job.problem_source,
                                  problem_name=job.problem_name, device=job.device))
    return None if probe.ok else probe_failure(args.problem, job.problem_name, probe)


def run(args: argparse.Namespace) -> int:
    lane_process.warm_children = False  # one evaluation and out: nothing to keep warm for
    try:
        job = _job(args)
    except _Usage as exc:
        print(f"error: {exc}", file=sys.stderr)
        return USAGE_ERROR
    console = Console()
    result = judge(job, console if console.is_terminal and not args.json else None)
    failure = _problem_failure(args, job) if reference_failed(result) else None
    if failure is not None:  # the problem, not the candidate: say so like the app and `run`
        report(failure)
        return NOT_OK
    if args.json:
        print(result.to_json())
        sys.stdout.flush()
    else:
        _print_summary(result, console)
    return 0 if result.ok else NOT_OK
