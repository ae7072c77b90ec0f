"""One GPU for the model and the timing (issue 24): corpus speedups with a model server
generating on the timing GPU, against the same candidates timed with it idle.

The model server is `benchmarks/generating_server.py`, a separate process listening on
localhost (so the app's detection, listener → `nvidia-smi` compute apps → GPU, can find it):
before every chat answer it runs `model.generate` of a random-weight transformers Llama on
the GPU, then streams the corpus reply for the prompt's problem (keyed as
`benchmarks/scaling.py` keys them), so every run evaluates the same corpus pairs. Runs,
each a real `cudal1-tui run ... --headless --gpus 0` with its own sessions and a fresh
server:

- **idle**: the model is made (its memory held) but never generates;
- **busy**: it generates for each of the session's requests (the gate's case: the session
  knows its own streams and times only between them);
- **loaded**: as busy, plus a background client posting a chat request every
  `--load-interval` s after the last one's answer, so the server also generates while
  candidates are timed. The session's quiet gate knows only its own streams
  (`cudal1_tui/engine/quiet_gate.py`, per server URL in one process): these generations are
  not seen by it, only by the evaluator's own detection where it has one (any finding it
  adds, such as `gpu_shared`, is listed from the traces).

Then candidates are matched by code with the idle run: speedups within ±5 %, same verdicts;
every session's `events.jsonl` is read (`overlaps()`: a timed window while the session
generated), and the timed windows are lined up with the server's own log of generations
(wall clock, per source). Last, **memory**: the server is started again holding all free
GPU memory but `--memory-free-mib`, and one problem is run: it must fail with the app's
"too little free memory" message and the server's fix.

    PYTHONUNBUFFERED=1 python3 benchmarks/shared_gpu.py --out "$OUT"        # H100/H200
    python3 benchmarks/shared_gpu.py --wait-for-model always --out "$OUT"   # force the gate
    python3 benchmarks/shared_gpu.py --builds warm --out "$OUT"   # with the CUDA-kernel pairs
    python3 benchmarks/shared_gpu.py --device cpu --problems 1 --candidates 1 \\
        --timing-budget 1 --out /tmp/shared-gpu                             # dry run, no GPU

Needs transformers on the GPU machine (`--generator llama`); the CPU dry run uses a torch
matmul loop instead and skips the memory step. Writes OUT/shared_gpu.json, the tables in
OUT/shared_gpu.md, and OUT/logs.tar.gz: per run
logs/RUN/{server.log,generations.jsonl,run.log,events/*.jsonl,events/*.trace.jsonl}. See
docs/benchmarks/shared-gpu.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.generating_server import LOAD_MARK  # noqa: E402
from benchmarks.scaling import MANIFEST, pairs_for, prebuild, replies, run_width  # noqa: E402
from cudal1_tui.cli.run_report import code_sha  # noqa: E402
from cudal1_tui.gpushare import memory, server_gpus, smi  # noqa: E402
from cudal1_tui.gpushare.devices import physical_gpu  # noqa: E402
from cudal1_tui.judging import needs_build  # noqa: E402
from cudal1_tui.replay import Reply  # noqa: E402
from cudal1_tui.store.event_log import overlaps, read_events  # noqa: E402

SERVER = ROOT / "benchmarks" / "generating_server.py"
MODEL = "shared-gpu-replay"
PHASES = ("idle", "busy", "loaded")
AGREE = 0.05  # issue 24: speedups within ±5 % of the idle run's
LIKE = "transformers serve"  # what the server is (see generating_server.py, --like)
MEMORY_WORDS = "too little free memory"
Report = dict[str, Any]  # a run's --report-json
Row = dict[str, Any]  # a line of a JSONL log


# -- the generating server ---------------------------------------------------------------

@dataclass(frozen=True)
class Server:
    url: str
    folder: Path  # server.log, generations.jsonl

    @property
    def generations(self) -> Path:
        return self.folder / "generations.jsonl"


def write_replies(served: list[Reply], path: Path) -> None:
    """The replay script the server reads: the corpus replies and the background load's."""
    rows = [asdict(r) for r in served]
    rows.append(asdict(Reply(content="ok", key=LOAD_MARK)))
    path.write_text(json.dumps({"model": MODEL, "replies": rows}), encoding="utf-8")


def server_command(args: argparse.Namespace, replies_file: Path, folder: Path, *,
                   generate: bool, hold_free_mib: int) -> list[str]:
    command = [sys.executable, str(SERVER), "--replies", str(replies_file),
               "--url-file", str(folder / "url.txt"), "--generator", args.generator,
               "--device", args.device, "--hidden", str(args.hidden),
               "--layers", str(args.layers), "--gen-tokens", str(args.gen_tokens),
               "--gen-batch", str(args.gen_batch), "--gen-seconds", str(args.gen_seconds),
               "--generations", str(folder / "generations.jsonl"), "--like", LIKE]
    if not generate:
        command.append("--idle")
    if hold_free_mib:
        command += ["--hold-free-mib", str(hold_free_mib)]
    return command


def _ready(process: subprocess.Popen[bytes], folder: Path, timeout_s: float) -> str:
    url_file, deadline = folder / "url.txt", time.monotonic() + timeout_s
    while not url_file.is_file():
        if process.poll() is not None or time.monotonic() > deadline:
            tail = (folder / "server.log").read_text(encoding="utf-8", errors="replace")
            raise SystemExit(f"the generating server did not start:\n{tail[-3000:]}")
        time.sleep(0.2)
    return url_file.read_text(encoding="utf-8").strip()


def server_lines(log: Path) -> list[str]:
    """What the server said about itself (the time of one generation, memory held)."""
    text = log.read_text(encoding="utf-8", errors="replace") if log.is_file() else ""
    return [ln for ln in text.splitlines() if ln.startswith(("one generation", "holding"))]


@contextmanager
def serving(args: argparse.Namespace, replies_file: Path, folder: Path, *, generate: bool,
            hold_free_mib: int = 0) -> Iterator[Server]:
    """A generating server in its own process for the ``with`` block."""
    folder.mkdir(parents=True, exist_ok=True)
    command = server_command(args, replies_file, folder, generate=generate,
                             hold_free_mib=hold_free_mib)
    with (folder / "server.log").open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL)
        try:
            yield Server(_ready(process, folder, args.server_timeout), folder)
        finally:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


# -- the background load -----------------------------------------------------------------

class Load:
    """A second client: a chat request every ``interval`` s after the last one's answer."""

    def __init__(self, url: str, interval: float) -> None:
        self.url, self.interval = f"{url}/chat/completions", interval
        self.answered, self.failed = 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="load", daemon=True)

    def _post(self) -> None:
        body = {"model": MODEL, "stream": False, "max_tokens": 16,
                "messages": [{"role": "user", "content": f"{LOAD_MARK}: say ok " * 200}]}
        request = urllib.request.Request(self.url, data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=120) as answer:
                answer.read()
            self.answered += 1
        except OSError:
            self.failed += 1

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._post()

    def __enter__(self) -> Load:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=180)


# -- who shares the GPU ------------------------------------------------------------------

def timing_gpu(device: str) -> int | None:
    """The nvidia-smi index of the run's lane (``--gpus 0``: torch's cuda:0)."""
    return physical_gpu("cuda:0", smi.gpus()) if device == "cuda" else None


def sharing_for(args: argparse.Namespace, url: str) -> dict[str, Any]:
    """The settings the runs use, from the app's own detection run here first: where it
    does not find the server on the timing GPU (a container's nvidia-smi shows no pids),
    ``model_gpus`` names the GPU, as docs/model-servers.md tells users to."""
    gpu = timing_gpu(args.device)
    found = server_gpus.detect(url) if gpu is not None else None
    detected = found is not None and found.uses(gpu)
    wait = args.wait_for_model or ("always" if args.device == "cpu" else "auto")
    gpus = args.model_gpus or ("auto" if detected or gpu is None else str(gpu))
    return {"timing_gpu": gpu, "detected": detected,
            "detection": asdict(found) if found else "timing on the CPU",
            "wait_for_model": wait, "model_gpus": gpus}


def run_settings(args: argparse.Namespace, sharing: dict[str, Any]) -> dict[str, str]:
    return {"CUDAL1_TIMING_BUDGET_S": str(args.timing_budget),
            "CUDAL1_WAIT_FOR_MODEL": sharing["wait_for_model"],
            "CUDAL1_MODEL_GPUS": sharing["model_gpus"],
            "CUDAL1_HEADERS_TIMEOUT_S": "180"}  # one generation at a time: requests queue


# -- evidence from the sessions ----------------------------------------------------------

def windows(rows: list[Row]) -> list[tuple[float, float]]:
    """The timed windows of one session's event log, as wall-clock (start, end)."""
    open_: dict[str, float] = {}
    found: list[tuple[float, float]] = []
    for row in rows:
        key = f"{row.get('pid')}:{row.get('id')}"
        if row.get("event") == "timing_started":
            open_[key] = float(row["t"])
        elif row.get("event") == "timing_ended" and key in open_:
            found.append((open_.pop(key), float(row["t"])))
    return found


def clashes(timed: list[tuple[float, float]], gens: list[Row]) -> dict[str, int]:
    """Timed windows that intersect a generation of the server's log, per source."""
    out: Counter[str] = Counter()
    for source in ("session", "load"):
        spans = [(float(g["start"]), float(g["end"])) for g in gens if g["source"] == source]
        out[source] = sum(any(a < d and c < b for c, d in spans) for a, b in timed)
    return dict(out)


def detections(rows: list[Row]) -> list[str]:
    """What each session's GPU share said at opening (events.jsonl ``server_gpus``)."""
    return [f"gpus={r.get('gpus')} kind={r.get('kind') or '?'} mode={r.get('mode')} "
            f"shared={r.get('shared')} ({r.get('how')})"
            for r in rows if r.get("event") == "server_gpus"]


def evidence(sessions: Path, server: Server, keep: Path) -> dict[str, Any]:
    """Overlaps by the session's own log and by the server's, with copies of the logs."""
    keep.mkdir(parents=True, exist_ok=True)
    logs = sorted(sessions.rglob("events.jsonl"))
    timed: list[tuple[float, float]] = []
    gate_overlaps, seen = 0, Counter[str]()
    for path in logs:
        rows = read_events(path)
        (keep / f"{path.parent.name}.jsonl").write_bytes(path.read_bytes())
        gate_overlaps += len(overlaps(rows))
        timed += windows(rows)
        seen.update(detections(rows))
    for path in sessions.rglob("trace.jsonl"):  # every verdict with its message
        (keep / f"{path.parent.name}.trace.jsonl").write_bytes(path.read_bytes())
    gens = read_events(server.generations)  # the same JSONL reading: one object a line
    return {"sessions": len(logs), "timed_windows": len(timed),
            "events_overlaps": gate_overlaps,
            "generations": dict(Counter(str(g["source"]) for g in gens)),
            "timed_during_generation": clashes(timed, gens), "server_gpus": dict(seen)}


def findings(sessions: Path, names: dict[str, str]) -> dict[str, list[str]]:
    """The evaluator's and the gate's finding codes per corpus pair (``gpu_shared`` among
    them where the evaluator reports it, as a flag or as a result field)."""
    out: dict[str, set[str]] = {}
    for path in sessions.rglob("trace.jsonl"):
        rows: list[Row] = read_events(path)
        for row in rows:
            if row.get("kind", "candidate") != "candidate" or "result" not in row:
                continue
            result = row["result"] or {}
            codes = {str(f.get("code")) for f in result.get("flags") or []}
            codes |= {key for key in ("gpu_shared",) if result.get(key)}
            name = names.get(code_sha(str(row.get("code", ""))), "?")
            out.setdefault(name, set()).update(codes)
    return {name: sorted(codes) for name, codes in sorted(out.items()) if codes}


def new_findings(idle: dict[str, list[str]], other: dict[str, list[str]]) -> dict[str, list[str]]:
    """The finding codes a pair got in this run and not in the idle one."""
    out = {name: sorted(set(codes) - set(idle.get(name, []))) for name, codes in other.items()}
    return {name: codes for name, codes in out.items() if codes}


# -- comparing runs ----------------------------------------------------------------------

def by_pair(report: Report, names: dict[str, str]) -> dict[str, list[Row]]:
    out: dict[str, list[Row]] = {}
    for outcome in report.get("outcomes", []):
        out.setdefault(names.get(outcome["code_sha"], outcome["code_sha"]), []).append(outcome)
    return out


def _speedup(outcomes: list[Row]) -> float | None:
    values = [o["speedup"] for o in outcomes if o["status"] == "ok" and o["speedup"]]
    return statistics.median(values) if values else None


def compare(idle: Report, other: Report, names: dict[str, str]) -> list[dict[str, Any]]:
    """Per corpus pair: both runs' speedups (median of its candidates) and verdicts."""
    first, second = by_pair(idle, names), by_pair(other, names)
    rows = []
    for name in sorted(set(first) & set(second)):
        before, after = _speedup(first[name]), _speedup(second[name])
        ratio = after / before if before and after else None
        rows.append({"pair": name, "idle": before, "speedup": after, "ratio": ratio,
                     "within": None if ratio is None else abs(ratio - 1) <= AGREE,
                     "same_verdict": {o["status"] for o in first[name]}
                     == {o["status"] for o in second[name]}})
    return rows


def agreement(rows: list[dict[str, Any]]) -> dict[str, Any]:
    ratios = [r["ratio"] for r in rows if r["ratio"] is not None]
    return {"compared": len(ratios), "within": sum(bool(r["within"]) for r in rows),
            "worst": max(ratios, key=lambda x: abs(x - 1)) if ratios else None,
            "same_verdicts": sum(r["same_verdict"] for r in rows), "pairs": len(rows)}


# -- the runs ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Plan:
    """What every run shares."""

    args: argparse.Namespace
    replies_file: Path
    problems: list[Path]
    names: dict[str, str]
    build: Path
    tmp: Path

    @property
    def logs(self) -> Path:
        """Each run's logs (packed into OUT/logs.tar.gz: a few files come back from a GPU
        machine, not dozens)."""
        return self.tmp / "logs"


def run_phase(plan: Plan, phase: str, sharing: dict[str, Any] | None) -> dict[str, Any]:
    args, folder = plan.args, plan.logs / phase
    work = plan.tmp / phase
    work.mkdir()
    with serving(args, plan.replies_file, folder, generate=phase != "idle") as server:
        sharing = sharing or sharing_for(args, server.url)
        print(f"{phase}: server at {server.url}; wait_for_model={sharing['wait_for_model']}, "
              f"model_gpus={sharing['model_gpus']}", flush=True)
        load = Load(server.url, args.load_interval) \
            if phase == "loaded" and args.load_interval > 0 else None
        with load or contextlib.nullcontext():
            report = run_width(1, args, server.url, work, plan.problems, plan.build,
                               settings=run_settings(args, sharing))
    (folder / "run.log").write_bytes((work / "run-1.log").read_bytes())
    said = server_lines(folder / "server.log")
    result: dict[str, Any] = {
        "phase": phase, "sharing": sharing, "report": report, "server": said,
        "evidence": evidence(work / "sessions-1", server, folder / "events"),
        "findings": findings(work / "sessions-1", plan.names),
        "load": {"answered": load.answered, "failed": load.failed} if load else None}
    print(f"{phase}: {report['candidates']} candidates, {report['timed']} timed in "
          f"{report['wall_s']:.0f} s (exit {report['exit_code']}); {'; '.join(said)}"
          f"; {json.dumps(result['evidence'])}", flush=True)
    return result


def excerpt(text: str, start: str, length: int = 600) -> str:
    flat = " ".join(text.split())  # the console wraps long lines
    at = flat.find(start)
    return flat[at:at + length] if at >= 0 else ""


def memory_step(plan: Plan, sharing: dict[str, Any] | None) -> dict[str, Any]:
    """A server holding all but ``--memory-free-mib`` of the GPU: one problem must fail
    with the memory message and the server's fix (wait_for_model auto: the server named)."""
    args = plan.args
    if args.device != "cuda" or not args.memory_free_mib or not plan.problems:
        return {"skipped": "no GPU (--device cpu)" if args.device != "cuda"
                else "--memory-free-mib 0"}
    folder, work = plan.logs / "memory", plan.tmp / "memory"
    work.mkdir()
    with serving(args, plan.replies_file, folder, generate=False,
                 hold_free_mib=args.memory_free_mib) as server:
        sharing = {**(sharing or sharing_for(args, server.url)), "wait_for_model": "auto"}
        found = server_gpus.detect(server.url, sharing["model_gpus"])
        one = argparse.Namespace(**{**vars(args), "candidates": 1})
        report = run_width(1, one, server.url, work, plan.problems[:1], plan.build,
                           settings=run_settings(args, sharing), need_report=False)
    log = (work / "run-1.log").read_text(encoding="utf-8", errors="replace")
    (folder / "run.log").write_text(log, encoding="utf-8")
    fix = memory.fix_for(found.kind, found.uses(sharing["timing_gpu"]))
    flat = " ".join(log.split())
    return {"free_mib_left": args.memory_free_mib, "server": asdict(found),
            "server_said": server_lines(folder / "server.log"),
            "message_found": MEMORY_WORDS in flat, "fix_found": " ".join(fix.split()) in flat,
            "expected_fix": fix, "message": excerpt(log, MEMORY_WORDS),
            "exit_code": report["exit_code"], "log_tail": log[-1500:]}


# -- the tables --------------------------------------------------------------------------

def _x(value: float | None) -> str:
    return f"{value:.2f}×" if value is not None else "—"


def summary_table(results: dict[str, Any]) -> str:
    lines = ["| run | candidates | timed | wall s | generations session/load | same verdicts "
             f"| speedups within ±{AGREE:.0%} of idle (worst) | overlaps in events.jsonl "
             "| timed during a generation, session/load (server log) | findings not in idle |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for phase, r in results["runs"].items():
        e, rep, a = r["evidence"], r["report"], r.get("agreement")
        gens, clash = e["generations"], e["timed_during_generation"]
        agree = (f"{a['within']}/{a['compared']} ({_x(a['worst'])})" if a else "(baseline)")
        same = f"{a['same_verdicts']}/{a['pairs']}" if a else "—"
        found = ("; ".join(f"{k}: {','.join(v)}" for k, v in r["new_findings"].items())
                 or "—") if "new_findings" in r else "(baseline)"
        lines.append(
            f"| {phase} | {rep['candidates']} | {rep['timed']} | {rep['wall_s']:.0f} | "
            f"{gens.get('session', 0)}/{gens.get('load', 0)} | {same} | {agree} | "
            f"{e['events_overlaps']} | {clash.get('session', 0)}/{clash.get('load', 0)} | "
            f"{found} |")
    return "\n".join(lines)


def pairs_table(results: dict[str, Any]) -> str:
    others = [p for p in results["runs"] if p != "idle" and results["runs"][p].get("pairs")]
    if not others:
        return ""
    rows: dict[str, dict[str, str]] = {}
    for phase in others:
        for row in results["runs"][phase]["pairs"]:
            cells = rows.setdefault(row["pair"], {"idle": _x(row["idle"])})
            mark = "" if row["within"] in (None, True) else " ✗"
            cells[phase] = f"{_x(row['speedup'])}{mark}"
    lines = ["| pair | idle | " + " | ".join(others) + " |",
             "|---|---|" + "---|" * len(others)]
    lines += [f"| {name} | {cells['idle']} | "
              + " | ".join(cells.get(p, "—") for p in others) + " |"
              for name, cells in sorted(rows.items())]
    return "\n".join(lines)


def memory_line(step: dict[str, Any]) -> str:
    if "skipped" in step:
        return f"memory: skipped ({step['skipped']})"
    verdict = "ok" if step["message_found"] and step["fix_found"] else "NOT as expected"
    return (f"memory ({step['free_mib_left']} MiB left free): {verdict}; message found: "
            f"{step['message_found']}, server's fix found: {step['fix_found']}\n"
            f"  {step['message'] or step['log_tail'][-600:]}")


# -- main --------------------------------------------------------------------------------

def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add = parser.add_argument
    add("--device", choices=("cuda", "cpu"), default="cuda",
        help="cpu: a dry run of the plumbing (numbers meaningless, no memory step)")
    add("--phases", default=",".join(PHASES), help="runs, from idle,busy,loaded")
    add("--problems", type=int, default=6, help="the first N corpus problems (0: all)")
    add("--only", nargs="*", default=[],
        help="problem file name substrings to keep (before --problems): problems timed in "
             "milliseconds compare at ±5 %%; a launch-bound one's noise is larger")
    add("--candidates", type=int, default=2, help="candidates per problem (its first pairs)")
    add("--rounds", type=int, default=1, help="rounds per problem")
    add("--parallel", type=int, default=0, help="problems at once (default: the app's)")
    add("--timing-budget", type=float, default=2.0, help="seconds of timing per candidate")
    add("--builds", choices=("skip", "warm"), default="skip",
        help="skip: leave out the pairs that compile an extension; warm: build them once, "
             "before the runs, into one cache (nvcc outside the timed runs)")
    add("--generator", choices=("llama", "matmul", "none"), default=None,
        help="the server's work before each reply (default: llama on cuda, matmul on cpu)")
    add("--hidden", type=int, default=2048, help="llama: hidden size")
    add("--layers", type=int, default=12, help="llama: layers")
    add("--gen-tokens", type=int, default=128, help="llama: new tokens a generation")
    add("--gen-batch", type=int, default=8, help="llama: sequences a generation")
    add("--gen-seconds", type=float, default=0.3, help="matmul: seconds a generation")
    add("--load-interval", type=float, default=0.5,
        help="loaded run: seconds between the background client's requests (0: none)")
    add("--wait-for-model", choices=("auto", "always", "never"), default=None,
        help="the app's setting (default: auto on cuda, always on cpu)")
    add("--model-gpus", default=None,
        help="the app's setting (default: auto where the app's detection finds the server "
             "on the timing GPU, else that GPU's index)")
    add("--memory-free-mib", type=int, default=2048,
        help="memory step: GPU memory the server leaves free (0: skip the step)")
    add("--server-timeout", type=float, default=300.0, help="seconds for the server to start")
    add("--build-dir", type=Path, default=None, help="the build cache (default: a temp dir)")
    add("--manifest", type=Path, default=MANIFEST)
    add("--out", type=Path, default=Path("shared-gpu-out"))
    args = parser.parse_args()
    args.generator = args.generator or ("llama" if args.device == "cuda" else "matmul")
    args.out = args.out.absolute()
    return args


def corpus(args: argparse.Namespace) -> dict[str, list[dict[str, Any]]]:
    """The problems' first pairs: the ones a run of ``rounds × candidates`` is served;
    ``--builds skip`` leaves out the pairs that compile an extension (nvcc: minutes)."""
    by_problem = pairs_for(args.device, args.manifest)
    if args.builds == "skip":
        plain = {p: [x for x in pairs if not needs_build((ROOT / x["candidate"]).read_text(
            encoding="utf-8"))] for p, pairs in by_problem.items()}
        by_problem = {p: pairs for p, pairs in plain.items() if pairs}
    if args.only:
        by_problem = {p: pairs for p, pairs in by_problem.items()
                      if any(o in Path(p).name for o in args.only)}
    if args.problems:
        by_problem = dict(list(by_problem.items())[:args.problems])
    return {p: pairs[:args.rounds * args.candidates] for p, pairs in by_problem.items()}


def host() -> dict[str, str]:
    gpu = smi.run_smi(["--query-gpu=name,driver_version", "--format=csv,noheader"]) or ""
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True, check=False).stdout.strip()
    return {"gpu": gpu.strip().splitlines()[0] if gpu.strip() else "none", "commit": commit}


def save(results: dict[str, Any], plan: Plan) -> None:
    """OUT/shared_gpu.json and OUT/logs.tar.gz, after every step (a run cut short keeps
    what it has)."""
    out = plan.args.out
    (out / "shared_gpu.json").write_text(json.dumps(results, indent=2, default=str),
                                         encoding="utf-8")
    part = out / "logs.tar.gz.part"
    with tarfile.open(part, "w:gz") as tar:
        tar.add(plan.logs, arcname="logs")
    part.replace(out / "logs.tar.gz")


def run_all(plan: Plan, phases: list[str]) -> dict[str, Any]:
    results: dict[str, Any] = {"host": host(), "settings": vars(plan.args), "runs": {}}
    sharing: dict[str, Any] | None = None
    for phase in phases:
        result = run_phase(plan, phase, sharing)
        sharing = result["sharing"]
        if phase != "idle" and "idle" in results["runs"]:
            result["pairs"] = compare(results["runs"]["idle"]["report"], result["report"],
                                      plan.names)
            result["agreement"] = agreement(result["pairs"])
            result["new_findings"] = new_findings(results["runs"]["idle"]["findings"],
                                                  result["findings"])
        results["runs"][phase] = result
        save(results, plan)
    results["memory"] = memory_step(plan, sharing)
    save(results, plan)
    return results


def main() -> int:
    args = parse_args()
    phases = [p.strip() for p in args.phases.split(",") if p.strip()]
    if unknown := set(phases) - set(PHASES):
        raise SystemExit(f"unknown phases {sorted(unknown)}: use {','.join(PHASES)}")
    by_problem = corpus(args)
    served, names = replies(by_problem)
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"{len(by_problem)} problems, {len(served)} corpus pairs ({args.builds} builds), "
          f"runs: {', '.join(phases)}; generator {args.generator} on {args.device}", flush=True)
    with tempfile.TemporaryDirectory(prefix="shared-gpu-") as tmp:
        build = (args.build_dir or Path(tmp) / "build").absolute()
        if args.builds == "warm":
            prebuild(by_problem, args.device, build)
        plan = Plan(args, Path(tmp) / "logs" / "replies.json",
                    [ROOT / p for p in by_problem], names, build, Path(tmp))
        plan.logs.mkdir()
        write_replies(served, plan.replies_file)
        results = run_all(plan, phases)
    tables = "\n\n".join(filter(None, [summary_table(results), pairs_table(results),
                                        memory_line(results["memory"])]))
    (args.out / "shared_gpu.md").write_text(tables + "\n", encoding="utf-8")
    print(f"\n{tables}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
