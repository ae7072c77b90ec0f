"""One round: built-in candidates (first round only), then the model's, each to its verdict.

Order within a round: the built-in candidates still missing from the session are
evaluated first, so the model's prompt of the same round already shows what the easy
wins give. Model slots then stream concurrently (one request per slot); each reply is
parsed and queued for evaluation as soon as it is complete, so evaluation overlaps the
other slots' generation. Queued candidates go through the pool's pipeline (``engine.pool``,
``engine.stages``): they compile on the CPU cores while earlier ones are timed, and are
evaluated, one at a time per device, in the order they were queued. A record is appended
the moment its verdict is known. Where the model server shares the timing GPU
(``engine.gpu_share``), an evaluation waits until no stream is in flight, and a stream
waits for an evaluation running or waiting.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from dataclasses import dataclass, field

from cudal1_evaluator.schema import Result
from cudal1_tui.engine import prompts
from cudal1_tui.engine.abandon import Abandoned, unless_cancelled
from cudal1_tui.engine.capping import CUT_FIX, CappedReply, cap_reply
from cudal1_tui.engine.events import (
    CandidateFinished,
    ChunkKind,
    EngineError,
    RoundFinished,
    RoundStarted,
    Stage,
    StageChanged,
    StreamChunk,
)
from cudal1_tui.engine.recording import Draft, finish, refused, torch_compile_ms
from cudal1_tui.engine.slot_cancel import SlotCancel
from cudal1_tui.engine.stages import Stages
from cudal1_tui.engine.workspace import Workspace
from cudal1_tui.errors import ModelError
from cudal1_tui.llm.client_errors import ModelCancelled, StreamCut
from cudal1_tui.llm.completion import Completion
from cudal1_tui.llm.parsing import parse_reply
from cudal1_tui.proposers import BuiltinCandidate
from cudal1_tui.records import CandidateRecord, SamplingSettings

CANCELLED_BY_USER = "cancelled by the user while the model was replying"


def sampling_limit(draft: Draft) -> int | None:
    return draft.sampling.max_tokens if draft.sampling else None


@dataclass
class RoundSummary:
    """What one round did. ``records`` are this round's candidates, in verdict order."""

    round: int
    records: list[CandidateRecord] = field(default_factory=list)
    best_speedup: float | None = None  # the session's best after this round
    cancelled: bool = False
    message: str = ""
    model_used: bool = False
    builtin: int = 0  # built-in candidates this round
    nothing_to_do: bool = False  # no built-in left and no model: further rounds are pointless


class RoundRunner:
    def __init__(self, ws: Workspace, round_: int) -> None:
        self.ws = ws
        self.round = round_
        self._records: list[CandidateRecord] = []
        self._futures: list[Future[CandidateRecord | None]] = []
        self._lock = threading.Lock()
        self._stages = Stages(ws, round_, self._record, self._report)
        self._slot_cancels: dict[int, SlotCancel] = {}

    def cancel_slot(self, slot: int) -> bool:
        """Stop one model slot's stream; the round and the other slots go on."""
        cancel = self._slot_cancels.get(slot)
        if cancel is None or cancel.is_set():
            return False
        cancel.set()
        return True

    # -- the round ---------------------------------------------------------------------

    def run(self, builtins: list[BuiltinCandidate], model_slots: int) -> RoundSummary:
        ws = self.ws
        ws.emit(RoundStarted(self.round, len(builtins) + model_slots))
        for slot, candidate in enumerate(builtins):
            self._queue(Draft(self.round, slot, candidate.source, code=candidate.code))
        self._wait()  # the model's prompt shows the built-ins' verdicts
        if model_slots and not ws.cancel.is_set():
            self._model_slots(range(len(builtins), len(builtins) + model_slots))
            self._wait()
        return self._finish(len(builtins), model_slots > 0)

    def _finish(self, builtin: int, model_used: bool) -> RoundSummary:
        best = self.ws.best()
        cancelled = self.ws.cancel.is_set()
        best_speedup = best.speedup if best else None
        self.ws.emit(RoundFinished(self.round, best_speedup, cancelled=cancelled,
                                   torch_compile_ms=torch_compile_ms(list(self._records))))
        message = "cancelled" if cancelled else f"{len(self._records)} candidate(s) evaluated"
        return RoundSummary(self.round, list(self._records), best_speedup, cancelled, message,
                            model_used, builtin)

    def _wait(self) -> None:
        while True:
            with self._lock:
                pending = [f for f in self._futures if not f.done()]
            if not pending:
                return
            for future in pending:
                future.result()

    # -- model slots -------------------------------------------------------------------

    def _model_slots(self, slots: range) -> None:
        ws = self.ws
        ctx = prompts.PromptContext(ws.templates, ws.problem.eval_source, ws.device,
                                    ws.reference_ms)
        records = ws.records()
        target = prompts.repair_target(records, self.round)
        threads = []
        for slot in slots:
            if target is not None and slot == slots.start:
                prompt = prompts.repair(ctx, target)
            else:
                seed = prompts.seed_for(ws.settings.seed, self.round, slot)
                prompt = prompts.contrastive(ctx, records, ws.settings, seed)
            self._slot_cancels[slot] = SlotCancel(ws.cancel)
            thread = threading.Thread(target=self._guarded, args=(slot, prompt),
                                      name=f"slot-{slot}", daemon=True)
            thread.start()
            threads.append(thread)
        for thread in threads:
            thread.join()

    def _guarded(self, slot: int, prompt: prompts.Prompt) -> None:
        """A failure in one slot (even a bug) is reported; the other slots and the session go on."""
        try:
            self._model_slot(slot, prompt)
        except Exception as exc:
            self._report(slot, exc)

    def _report(self, slot: int, exc: Exception) -> None:
        fix = getattr(exc, "fix", "") or "this is a bug in cudal1-tui: please report it with the " \
            "session's trace.jsonl"
        message = getattr(exc, "message", "") or f"{type(exc).__name__}: {exc}"
        self.ws.emit(EngineError(f"slot {slot}: {message}", fix, self.round, True))

    def _model_slot(self, slot: int, prompt: prompts.Prompt) -> None:
        ws = self.ws
        sampling = ws.gateway.sampling()
        draft = Draft(self.round, slot, "model", prompt_messages=prompt.messages,
                      exemplars=prompt.exemplars, model=ws.gateway.availability.model,
                      sampling=sampling)
        self._stage(slot, "prompting", f"{prompt.kind} prompt, {len(prompt.exemplars)} exemplar(s)")
        self._stage(slot, "generating")
        cancel = self._slot_cancels.get(slot) or SlotCancel(ws.cancel)
        try:
            completion = self._generate(slot, prompt, sampling, cancel)
        except ModelCancelled as exc:
            if cancel.slot_only:  # the user stopped this slot: keep what it had said
                if exc.partial:  # its reply and the reasoning streamed so far
                    self._take(draft, exc.partial[0])
                draft.parse_error = CANCELLED_BY_USER
                self._record(draft, refused(draft.parse_error, ws.settings.reward, "cancelled"))
            return
        except StreamCut as cut:
            self._record_cut(draft, cut)
            return
        except ModelError as exc:
            if not ws.cancel.is_set():
                ws.emit(EngineError(f"slot {slot}: {exc.message}", exc.fix, self.round, True))
            return
        finally:
            # the stream is over: esc can no longer stop this slot (its verdict is on its way)
            self._slot_cancels.pop(slot, None)
        self._parsed(draft, completion)

    def _generate(self, slot: int, prompt: prompts.Prompt, sampling: SamplingSettings,
                  cancel: SlotCancel) -> Completion:
        """One stream, kept apart from timed evaluations on a GPU the server shares."""
        ws = self.ws

        def notify(text: str) -> None:
            self._stage(slot, "generating", text)

        with ws.share.generating(self.round, slot, notify, cancel) as started:
            if not started:
                raise ModelCancelled([])
            return ws.gateway.generate(slot, prompt.messages, sampling, self._chunk, cancel,
                                       notify)

    def _chunk(self, slot: int, kind: str, text: str, tokens: int, rate: float) -> None:
        chunk_kind: ChunkKind = "reasoning" if kind == "reasoning" else "content"
        self.ws.emit(StreamChunk(self.round, slot, chunk_kind, text, tokens, rate))

    def _record_cut(self, draft: Draft, cut: StreamCut) -> None:
        """A stream cut mid-reply: the partial reply goes into the trace, marked as cut."""
        self.ws.emit(EngineError(f"slot {draft.slot}: {cut.message}", cut.fix, self.round, True))
        if cut.partial:
            self._take(draft, cut.partial[0])
        draft.usage["cut"] = cut.reason
        draft.parse_error = cut.message
        self._record(draft, refused(cut.message, self.ws.settings.reward, code="stream_cut"))

    def _take(self, draft: Draft, completion: Completion) -> CappedReply:
        """The reply (cut to the size cap) and its usage into the draft."""
        capped = cap_reply(completion.content, completion.reasoning, self.ws.settings.max_reply_kb)
        draft.raw_response, draft.reasoning = capped.content, capped.reasoning
        draft.model = completion.model or draft.model
        draft.usage = {**completion.usage.to_dict(), "elapsed_s": completion.elapsed_s,
                       "first_token_s": completion.first_token_s,
                       "tokens_per_s": completion.tokens_per_s,
                       "finish_reason": completion.finish_reason, **capped.usage()}
        return capped

    def _parsed(self, draft: Draft, completion: Completion) -> None:
        ws = self.ws
        self._stage(draft.slot, "parsing")
        capped = self._take(draft, completion)
        if capped.cut:
            ws.emit(EngineError(f"slot {draft.slot}: {capped.note()}", CUT_FIX, self.round, True))
        try:
            parsed = unless_cancelled(
                lambda: parse_reply(capped.content, capped.reasoning,
                                    model_signature=ws.problem.signature), ws.cancel, "parse")
        except Abandoned:
            return
        draft.sections, draft.code = parsed.sections, parsed.code
        draft.reasoning = draft.reasoning or parsed.reasoning
        if parsed.ok:
            self._queue(draft)
            return
        error = parsed.error or "the reply holds no code"
        if completion.truncated:
            error += f" (the reply hit the length limit of {sampling_limit(draft)} tokens)"
        draft.parse_error = error
        self._record(draft, refused(error, ws.settings.reward))

    # -- evaluation ----------------------------------------------------------------------

    def _queue(self, draft: Draft) -> None:
        future = self._stages.queue(draft)
        with self._lock:
            self._futures.append(future)

    def _record(self, draft: Draft, result: Result) -> CandidateRecord:
        ws = self.ws
        self._stage(draft.slot, "recording")
        record = finish(draft, result, session_id=ws.session.id, problem_name=ws.problem.name)
        ws.append(record)
        with self._lock:
            self._records.append(record)
        flags = tuple(f.code for f in result.flags)
        ws.emit(CandidateFinished(self.round, draft.slot, record.record_id, record.source,
                                  record.status, record.speedup, record.reward, flags))
        return record

    def _stage(self, slot: int, stage: Stage, detail: str = "", done: int = 0,
               total: int = 0) -> None:
        self.ws.emit(StageChanged(self.round, slot, stage, detail, done, total))
