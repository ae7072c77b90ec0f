"""``python -m evaluator``: run, probe or time a reference, each in an isolated child.

User-facing (print JSON on stdout; candidate code never runs in this process):
    python -m evaluator run JOB.json [-o RESULT.json]
    python -m evaluator probe PROBEJOB.json
    python -m evaluator reference JOB.json

Internal (spawned by ``evaluator.launch``; the verdict goes to ``--result-fd``):
    python -m evaluator _child {run,reference,probe} JOB.json --result-fd N ...
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any


def _child(args: argparse.Namespace) -> None:
    from evaluator.sandbox import Limits, apply_limits

    apply_limits(Limits.from_arg(args.limits))
    from evaluator.channel import WorkerChannel

    channel = WorkerChannel(args.result_fd, args.progress_fd, args.key_fd)
    text = Path(args.job).read_text(encoding="utf-8")
    payload: dict[str, Any]
    if args.mode == "probe":
        payload = _probe_payload(text)
    else:
        from evaluator.schema import Job

        job = Job.from_json(text)
        if args.mode == "run":
            from evaluator import worker

            payload = worker.run(job, channel).to_dict()
        else:
            from evaluator import reference

            payload = reference.run(job, channel).to_dict()
    channel.send(payload)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # no atexit hooks or lingering candidate threads between us and the exit


def _probe_payload(text: str) -> dict[str, Any]:
    from evaluator.schema import ProbeJob, ProbeResult

    job = ProbeJob.from_json(text)
    try:
        from evaluator.probe import run_probe
    except ImportError as exc:
        return asdict(ProbeResult(ok=False, error_kind="crash",
                                  message=f"evaluator.probe is unavailable: {exc}"))
    try:
        return asdict(run_probe(job))
    except BaseException as exc:
        from evaluator.harness import describe_exception

        return asdict(ProbeResult(ok=False, error_kind="raises", message=describe_exception(exc)))


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise SystemExit(f"error: cannot read {path}: {exc.strerror}") from None


def _user(args: argparse.Namespace) -> int:
    from evaluator import launch
    from evaluator.schema import Job, ProbeJob

    text = _read(args.job)
    try:
        if args.mode == "probe":
            out = launch.probe(ProbeJob.from_json(text)).to_json()
        elif args.mode == "reference":
            out = json.dumps(asdict(launch.pristine_reference(Job.from_json(text))), indent=2)
        else:
            out = launch.evaluate(Job.from_json(text)).to_json()
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except (ValueError, TypeError, KeyError) as exc:
        print(f"error: bad job file {args.job}: {exc}", file=sys.stderr)
        return 2
    if args.output:
        Path(args.output).write_text(out + "\n", encoding="utf-8")
    else:
        print(out)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluator", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for mode in ("run", "probe", "reference"):
        user = sub.add_parser(mode)
        user.add_argument("job")
        user.add_argument("-o", "--output", default=None, help="write the JSON here")
        user.set_defaults(mode=mode, handler=_user)
    child = sub.add_parser("_child")
    child.add_argument("mode", choices=["run", "probe", "reference"])
    child.add_argument("job")
    child.add_argument("--result-fd", type=int, required=True)
    child.add_argument("--progress-fd", type=int, required=True)
    child.add_argument("--key-fd", type=int, required=True)
    child.add_argument("--limits", default="{}")
    child.set_defaults(handler=_child)
    args = parser.parse_args(argv)
    return int(args.handler(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
