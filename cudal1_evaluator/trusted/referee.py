"""The referee child (trusted): the pristine reference, every input set, every comparison.

It never imports candidate code. From seeds the parent sends it makes each input set with the
problem's own ``get_inputs``, keeps the original, and exports a worker copy of the inputs plus
NaN-poisoned output buffers per worker call (``wire.tensor_exchange``). It times the
reference in bursts with the same loop the worker uses (``timing.burst``), keeps the strict
fp32 reference outputs, and after the worker ran, freezes ("seals") the worker's inputs and
outputs, then checks them: inputs bit-equal to the originals, outputs within tolerance.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from cudal1_evaluator.candidate_side import integrity
from cudal1_evaluator.common.compare import (
    as_tensors,
    clone_inputs,
    compare_outputs,
    describe_tolerance,
    same_inputs,
)
from cudal1_evaluator.common.harness import Harness, SetupError, describe_exception
from cudal1_evaluator.common.timing import burst
from cudal1_evaluator.schema import Job
from cudal1_evaluator.trusted import envinfo
from cudal1_evaluator.wire.report import WorkerReport
from cudal1_evaluator.wire.talk import Handler, Peer, serve
from cudal1_evaluator.wire.talk_messages import (
    Checked,
    CheckResult,
    Empty,
    Matched,
    MatchedSettings,
    Prepare,
    Prepared,
    RefereeInfo,
    RefereeInit,
    Reference,
    Release,
    SlotDesc,
    SlotNames,
    Times,
)
from cudal1_evaluator.wire.tensor_exchange import (
    copyable,
    export,
    export_tensor,
    poisoned_like,
    referee_delivery,
    sink_like,
)

# the candidate's settings the reference adopts when timed "matched" (precision parity)
PRECISION_KEYS = (
    "float32_matmul_precision", "cudnn.allow_tf32", "cuda.matmul.allow_tf32", "cudnn.benchmark",
    "cuda.matmul.allow_fp16_reduced_precision_reduction",
    "cuda.matmul.allow_bf16_reduced_precision_reduction", "fp32_precision",
    "cuda.matmul.fp32_precision", "cudnn.fp32_precision", "cudnn.conv.fp32_precision",
    "mkldnn.fp32_precision", "mkldnn.matmul.fp32_precision", "mkldnn.conv.fp32_precision",
)
AUTOCAST = {"fp16": torch.float16, "bf16": torch.bfloat16}


@dataclass
class Slot:
    """One worker call: its copy of a set's inputs and its output buffers."""

    inputs: list[Any]
    outputs: list[torch.Tensor]
    sealed_inputs: list[Any] | None = None
    sealed_outputs: list[torch.Tensor] | None = None


@dataclass
class InputSet:
    original: list[Any]
    expected: Any = None  # the strict fp32 reference output
    slots: dict[int, Slot] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    sink: list[torch.Tensor] = field(default_factory=list)  # where the reference's output goes


class Referee:
    def __init__(self, job: Job) -> None:
        self.job, self.xdir = job, Path(".")
        self.sets: dict[int, InputSet] = {}
        self.matched_settings: integrity.SettingsSnapshot | None = None
        self.autocast: torch.dtype | None = None

    # -- ops -----------------------------------------------------------------------------
    def init(self, msg: RefereeInit) -> RefereeInfo:
        self.xdir = Path(str(msg["xdir"]))
        self.h = Harness(self.job, init_seed=int(msg["init_seed"]))
        self.model = self.h.reference_model()
        self.strict_settings = integrity.snapshot_settings()
        if "matched" in msg:  # the matched referee: nothing runs under other settings
            self._adopt(msg["matched"])
        with torch.no_grad(), self._precision(strict="matched" not in msg):
            out = self.model(*self.h.make_inputs(int(msg["probe_seed"])))
        tensors = as_tensors(out)
        if tensors is None:
            raise SetupError("the reference returns neither a tensor nor a tuple of tensors")
        self.single = isinstance(out, torch.Tensor)
        self.templates = [t.detach() for t in tensors]
        tolerance = describe_tolerance(self.job.tolerance)
        tolerance["baseline_settings"] = self.h.baseline_settings
        return {"device": envinfo.device_info(self.h.device), "versions": envinfo.versions(),
                "tolerance": tolerance,
                "outputs": [{"shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch.")}
                            for t in self.templates]}

    def prepare(self, msg: Prepare) -> Prepared:
        slots: dict[str, SlotDesc] = {}
        dev = self.h.device
        for spec in msg["sets"]:
            sid = int(spec["id"])
            made = InputSet(original=self.h.make_inputs(int(spec["seed"])))
            for t in self.templates:
                buf, path = sink_like(t, self.xdir, dev)
                made.sink.append(buf)
                made.files += [path] if path is not None else []
            for k in range(int(spec["copies"])):
                pairs = [export(x, self.xdir, dev) for x in made.original]
                outs = [export_tensor(poisoned_like(t), self.xdir, dev) for t in self.templates]
                made.slots[k] = Slot([p[0] for p in pairs], [o[0] for o in outs])
                made.files += [d[1]["path"] for d in pairs + outs if d[1]["kind"] == "file"]
                slots[f"{sid}/{k}"] = {"inputs": [p[1] for p in pairs],
                                       "outputs": [o[1] for o in outs]}
            self.sets[sid] = made
        self.h.clock.sync()
        return {"slots": slots}

    def reference(self, msg: Reference) -> Times:
        ids = [int(i) for i in msg["sets"]]
        strict = msg.get("precision", "strict") == "strict"
        copies = [clone_inputs(self.sets[i].original) for i in ids]

        def deliver(i: int, out: Any) -> None:
            sink = self.sets[ids[i]].sink  # a sink per set: filled as the worker fills its own
            for buf, t in zip(sink, as_tensors(out) or [], strict=False):
                if copyable(t, buf):
                    referee_delivery(buf, t)
            if strict and self.sets[ids[i]].expected is None:
                self.sets[ids[i]].expected = out

        with torch.no_grad(), self._precision(strict):
            times = burst(self.h.clock, lambda a: self.model(*a), copies, deliver)
        return {"times_ms": times}

    def seal(self, msg: SlotNames) -> Empty:
        """Freeze what the worker left in shared memory, right after its burst."""
        for slot in self._slots(msg["slots"]):
            slot.sealed_inputs = clone_inputs(slot.inputs)
            slot.sealed_outputs = [t.clone() for t in slot.outputs]
        self.h.clock.sync()
        return {}

    def check(self, msg: SlotNames) -> Checked:
        results: list[CheckResult] = []
        for name in msg["slots"]:
            sid = int(str(name).split("/")[0])
            slot, made = self._slots([name])[0], self.sets[sid]
            if made.expected is None or slot.sealed_outputs is None:
                raise RuntimeError(f"slot {name} checked before the reference or the seal")
            sealed_in = slot.sealed_inputs or []
            mutated = [j for j, (a, b) in enumerate(zip(sealed_in, made.original, strict=True))
                       if not same_inputs([a], [b])]
            got: Any = slot.sealed_outputs[0] if self.single else list(slot.sealed_outputs)
            result = compare_outputs(made.expected, got, self.job.tolerance)
            results.append({"ok": result.ok, "abs": result.max_abs_err,
                            "rel": result.max_rel_err, "message": result.message,
                            "mutated": mutated})
        return {"results": results}

    def matched(self, msg: Matched) -> Empty:
        self._adopt(msg)
        return {}

    def release(self, msg: Release) -> Empty:
        for sid in msg["sets"]:
            made = self.sets.pop(int(sid), None)
            for name in made.files if made is not None else []:
                Path(name).unlink(missing_ok=True)
        return {}

    # -- helpers -------------------------------------------------------------------------
    def _adopt(self, msg: MatchedSettings) -> None:
        """The settings "matched" bursts run under: the candidate's precision changes."""
        values = dict(self.strict_settings.values)
        for key, change in (msg.get("settings") or {}).items():
            if key in PRECISION_KEYS and isinstance(change, dict) and key in values:
                values[key] = change.get("after")
        self.matched_settings = integrity.SettingsSnapshot(values)
        self.autocast = AUTOCAST.get(str(msg.get("autocast")))

    def _slots(self, names: list[str]) -> list[Slot]:
        found = []
        for name in names:
            sid, k = (int(x) for x in str(name).split("/"))
            found.append(self.sets[sid].slots[k])
        return found

    @contextlib.contextmanager
    def _precision(self, strict: bool) -> Iterator[None]:
        if strict or self.matched_settings is None:
            yield
            return
        integrity.restore_settings(self.matched_settings)
        try:
            if self.autocast is not None:
                with torch.autocast(self.h.device.type, dtype=self.autocast):
                    yield
            else:
                yield
        finally:
            integrity.restore_settings(self.strict_settings)


def run(job: Job, peer: Peer) -> WorkerReport:
    report = WorkerReport(phase="serving")
    started = time.monotonic()
    referee = Referee(job)

    def on_error(exc: BaseException) -> str:
        text = str(exc) if isinstance(exc, SetupError) else describe_exception(exc)
        report.fail("setup" if isinstance(exc, SetupError) else "runtime", text)
        return text

    handlers: dict[str, Handler] = {
        "init": referee.init, "prepare": referee.prepare, "reference": referee.reference,
        "seal": referee.seal, "check": referee.check, "matched": referee.matched,
        "release": referee.release}
    serve(peer, handlers, on_error)
    report.phase = "done" if not report.error_kind else report.phase
    report.busy_s = round(time.monotonic() - started, 3)
    return report
