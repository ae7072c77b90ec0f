"""``python -m cudal1_evaluator``: run, probe or time a reference, each in an isolated child.

User-facing (print JSON on stdout; candidate code never runs in this process):
    python -m cudal1_evaluator run JOB.json [-o RESULT.json]
    python -m cudal1_evaluator probe PROBEJOB.json
    python -m cudal1_evaluator reference JOB.json
    python -m cudal1_evaluator build JOB.json        # compile only (fills the build cache)
    python -m cudal1_evaluator lane [--no-warm]      # serve a timing lane (cudal1_evaluator.lane)

Internal (spawned by ``cudal1_evaluator.launch``; the verdict goes to ``--result-fd``):
    python -m cudal1_evaluator _child {run,referee,reference,probe,build} JOB.json --result-fd N ...
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path


def _child(args: argparse.Namespace) -> None:
    from cudal1_evaluator.isolation.startup_check import child_start

    child_start(args.job)  # refuse a tampered interpreter, run site, OS sandbox (helper B)
    from cudal1_evaluator.isolation.lifetime import bind_to_parent

    bind_to_parent()  # die with the parent, and take compilers and the rest along
    from cudal1_evaluator.isolation.sandbox import Limits, apply_limits

    apply_limits(Limits.from_arg(args.limits))
    if args.wait_fd is not None:
        apply_limits(Limits.from_arg(_wait_for_job(args.mode, args.wait_fd, args.warm_device,
                                                   args.job, args.watch_warm_up)))
        _bind_build_dir(args.job)
    from cudal1_evaluator.wire.channel import WorkerChannel
    from cudal1_evaluator.wire.talk import Peer

    channel = WorkerChannel(args.result_fd, args.progress_fd, args.key_fd)
    peer = Peer.from_fd(args.talk_fd) if args.talk_fd is not None else None
    text = Path(args.job).read_text(encoding="utf-8")
    payload: Mapping[str, object]
    if args.mode == "probe":
        payload = _probe_payload(text)
    else:
        from cudal1_evaluator.schema import Job

        job = Job.from_json(text)
        if args.mode in ("run", "profile"):
            from cudal1_evaluator.candidate_side import worker

            payload = worker.run(job, channel, peer=peer,
                                 profile_only=args.mode == "profile").to_dict()
        elif args.mode == "referee" and peer is not None:
            from cudal1_evaluator.trusted import referee

            payload = referee.run(job, peer).to_dict()
        elif args.mode == "build":
            from cudal1_evaluator.candidate_side import build_child as builder

            payload = asdict(builder.run(job))
        else:
            from cudal1_evaluator.trusted import pristine_reference as reference

            payload = reference.run(job, channel).to_dict()
    channel.send(payload)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # no atexit hooks or lingering candidate threads between us and the exit


def _bind_build_dir(job_path: str) -> None:
    """A warm candidate child, in its own mount namespace: its per-source build dir appears
    now that the job names it (no candidate code has run yet). Refuses to go on without it."""
    from cudal1_evaluator.isolation import namespaces
    from cudal1_evaluator.isolation.startup_check import EXIT_SETUP

    problem = namespaces.after_job(job_path)
    if problem:
        sys.stderr.write(f"evaluator setup error: cannot bind the build dir: {problem}\n")
        sys.stderr.flush()
        os._exit(EXIT_SETUP)


def _wait_for_job(mode: str, fd: int, device: str, job_path: str,
                  watch_warm_up: bool = True) -> str:
    """A warm child: import what the mode needs, say so (a file beside the job's, which the
    parent waits for before it hands the child out), then wait for the parent's go line (the
    job's limits; the job file is written by then), returned. No job and no candidate code has
    been seen before this returns. Exits when the pipe closes unused, when the parent dies, or
    after the idle limit."""
    import contextlib
    import importlib
    import select
    import time

    from cudal1_evaluator.isolation.sandbox import READY_NAME, WARM_IDLE_S

    parent = os.getppid()
    module = {"run": "cudal1_evaluator.candidate_side.worker",
              "profile": "cudal1_evaluator.candidate_side.worker",
              "reference": "cudal1_evaluator.trusted.pristine_reference",
              "build": "cudal1_evaluator.candidate_side.build_child",
              "referee": "cudal1_evaluator.trusted.referee"}.get(mode)
    if module is not None:
        importlib.import_module(module)  # torch and the evaluator, as a cold child imports them
        if mode in ("run", "profile") and watch_warm_up:  # the dtype watch's first use
            # (seconds: 1.6 s of CPU on a 2-core host), on our own op
            from cudal1_evaluator.candidate_side.dtype_watch import warm_up as warm_up_watch

            try:
                warm_up_watch()
            except BaseException:  # never handed out: the parent starts a cold child instead
                import traceback

                traceback.print_exc()
                os._exit(0)
        if device.startswith("cuda"):
            import torch

            # the CUDA context, created ahead (the worker reports a bad device itself)
            with contextlib.suppress(Exception):
                torch.zeros(1, device=device)
                if mode == "profile":
                    from cudal1_evaluator.candidate_side.profiling import warm_up

                    warm_up(device)
    with contextlib.suppress(OSError):  # never ready: the parent starts a cold child instead
        Path(job_path).with_name(READY_NAME).touch()
    deadline = time.monotonic() + WARM_IDLE_S
    while time.monotonic() < deadline and os.getppid() == parent:
        ready, _, _ = select.select([fd], [], [], 1.0)
        if ready:
            with os.fdopen(fd, "rb") as pipe:
                line = pipe.readline()
            if line.endswith(b"\n"):
                return line.decode()
            break  # closed unused
    os._exit(0)


def _probe_payload(text: str) -> Mapping[str, object]:
    from cudal1_evaluator.schema import ProbeJob, ProbeResult

    job = ProbeJob.from_json(text)
    try:
        from cudal1_evaluator.trusted.problem_probe import run_probe
    except ImportError as exc:
        return asdict(ProbeResult(ok=False, error_kind="crash",
                                  message=f"the problem probe is unavailable: {exc}"))
    try:
        return asdict(run_probe(job))
    except BaseException as exc:
        from cudal1_evaluator.common.harness import describe_exception

        return asdict(ProbeResult(ok=False, error_kind="raises", message=describe_exception(exc)))


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise SystemExit(f"error: cannot read {path}: {exc.strerror}") from None


def _user(args: argparse.Namespace) -> int:
    from cudal1_evaluator import launch
    from cudal1_evaluator.parent import warm
    from cudal1_evaluator.schema import Job, ProbeJob

    warm.enabled = False  # one evaluation and out: a warm child would only be thrown away

    text = _read(args.job)
    try:
        if args.mode == "probe":
            out = launch.probe(ProbeJob.from_json(text)).to_json()
        elif args.mode == "reference":
            out = json.dumps(asdict(launch.pristine_reference(Job.from_json(text))), indent=2)
        elif args.mode == "build":
            out = launch.build(Job.from_json(text)).to_json()
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


def _lane(args: argparse.Namespace) -> int:
    from cudal1_evaluator import lane

    return lane.main(warm_children=args.warm)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cudal1_evaluator", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for mode in ("run", "probe", "reference", "build"):
        user = sub.add_parser(mode)
        user.add_argument("job")
        user.add_argument("-o", "--output", default=None, help="write the JSON here")
        user.set_defaults(mode=mode, handler=_user)
    lane = sub.add_parser("lane", help="serve evaluations and probes over stdin/stdout")
    lane.add_argument("--no-warm", dest="warm", action="store_false",
                      help="no warm children (one evaluation and out)")
    lane.set_defaults(handler=_lane)
    child = sub.add_parser("_child")
    child.add_argument("mode", choices=["run", "profile", "probe", "reference", "build",
                                        "referee"])
    child.add_argument("job")
    child.add_argument("--result-fd", type=int, required=True)
    child.add_argument("--progress-fd", type=int, required=True)
    child.add_argument("--key-fd", type=int, required=True)
    child.add_argument("--limits", default="{}")
    child.add_argument("--talk-fd", type=int, default=None, help="the request/reply socket")
    child.add_argument("--wait-fd", type=int, default=None, help="start warm, wait for a byte")
    child.add_argument("--warm-device", default="")
    child.add_argument("--no-watch-warm-up", dest="watch_warm_up", action="store_false",
                       help="a warm runner that never runs a correctness trial (the "
                            "reference's): no dtype watch to warm up")
    child.set_defaults(handler=_child)
    args = parser.parse_args(argv)
    return int(args.handler(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
