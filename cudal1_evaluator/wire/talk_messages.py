"""The talk protocol's messages and the shared-tensor descriptions, as TypedDicts (stdlib only).

These are the shapes the parent, the referee and the worker send each other (see
``cudal1_evaluator.wire.talk`` for the ops). The JSON encoding is the plain dict. Requests come
from the trusted parent; a reply from the worker is untrusted and is read with
``talk.read_*``, never trusted for its types.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

from cudal1_evaluator.verdict_details import DeviceInfo, SettingsChanged, ToleranceInfo

# -- shared tensors (wire.tensor_exchange) ---------------------------------------------------


class SharedValue(TypedDict):
    kind: Literal["value"]
    value: object  # a non-tensor input, as a JSON value


class SharedFile(TypedDict):
    kind: Literal["file"]
    path: str
    dtype: str
    shape: list[int]
    numel: int


class SharedCuda(TypedDict):
    """A contiguous tensor in the referee's arena for this runner (``wire/cuda_ipc.py``): the
    arena as the index of its file descriptor among those sent with the message (``attach``:
    no token a runner could guess or alter), its size (which the runner maps), its serial in
    the referee (the same arena in a later pool: mapped once) and the tensor's byte offset."""

    kind: Literal["cuda"]
    device: int
    arena: int
    arena_bytes: int
    arena_serial: int
    offset_bytes: int
    dtype: str
    shape: list[int]


class SharedAway(TypedDict):
    """An output buffer the runner never sees (host outputs): it says where each output lies
    in its own memory, and the parent reads it (``parent/output_reader.py``)."""

    kind: Literal["away"]
    dtype: str
    shape: list[int]
    numel: int


SharedDesc = SharedValue | SharedFile | SharedCuda | SharedAway


class SlotDesc(TypedDict):
    """One copy of an input set: its inputs and the poisoned buffers for the outputs."""

    inputs: list[SharedDesc]
    outputs: list[SharedDesc]


# -- outputs ------------------------------------------------------------------------------------


class OutputSpec(TypedDict):
    """A reference output's shape and dtype (the referee's init reply)."""

    shape: list[int]
    dtype: str


class OutputItem(TypedDict, total=False):
    """One returned value as the worker describes it (untrusted: read with ``.get``)."""

    type: str
    shape: list[int]
    dtype: str
    device: str
    strides: list[int]


class OutputMeta(TypedDict, total=False):
    """One call's return value as the worker describes it (untrusted: read with ``.get``)."""

    count: int
    items: list[OutputItem]
    reused: bool


# -- the referee ----------------------------------------------------------------------------------


class MatchedSettings(TypedDict):
    settings: SettingsChanged  # the candidate's settings changes, as the worker reported them
    autocast: str | None
    threads: NotRequired[int | None]  # intra-op threads (1: the one-thread reference)


class RefereeInit(TypedDict):
    op: Literal["init"]
    init_seed: int
    probe_seed: int


class RefereeInfo(TypedDict, total=False):
    """The referee's init reply (total=False: the parent reads it with ``.get``)."""

    device: DeviceInfo
    versions: dict[str, str]
    tolerance: ToleranceInfo
    outputs: list[OutputSpec]
    set_bytes: int  # one input set and its outputs, in bytes (sizes the windows)
    free_bytes: int  # free device memory when the referee started (caps the windows)


class SetRequest(TypedDict):
    id: int
    seed: int


class PoolRequest(TypedDict):
    op: Literal["pool"]
    runner: int
    calls: int
    xdir: str  # the runner's own exchange dir (host tensors)
    out_dir: NotRequired[str]  # the referee's own dir, for host outputs the parent reads in


class PoolSlots(TypedDict):
    slots: list[SlotDesc]  # one per call of a window, opened once by the runner


class Fill(TypedDict):
    op: Literal["fill", "stage"]
    runner: int
    sets: list[int]  # set of slot FIRST+J
    first: NotRequired[int]  # stage, host: the slot of the first set (a window in parts)
    flush: NotRequired[bool]  # the caches evicted after the fill, in the same request
    all: NotRequired[bool]  # staged sets: every slot at once (else the first; ``Step``)


class Step(TypedDict, total=False):
    """Between two calls of a GPU window: sample the call done, release the next set."""

    op: Literal["step"]
    runner: int
    done: int  # the call the runner says is done (its outputs read at places drawn now)
    handles: list[str]  # allocations named since the last step (the runner's word, checked)
    where: list[list[int] | None]  # call ``done``'s outputs: [handle, offset] or None
    release: int  # the slot whose staged set goes in now


class Filled(TypedDict):
    values: list[list[object]]  # per slot, the non-tensor inputs (None where a tensor)


class IdleProbe(TypedDict):
    ms: float  # a tiny kernel's round trip, host clock (the GPU busy with others: longer)


class Seal(TypedDict, total=False):
    op: Literal["seal"]
    runner: int
    handles: list[str]  # the handles the drawn calls name (the runner's word, checked)
    sampled: list[list[Any]]  # [call, its outputs' places] for the calls the parent drew


class Place(TypedDict, total=False):
    op: Literal["place"]
    runner: int
    handles: list[str]  # the runner's word (CUDA IPC handles of its allocations), checked
    where: list[list[list[int] | None]]  # per call, per output: [handle, offset] or None


class Sealed(TypedDict):
    in_place: int  # outputs read in the runner's own memory
    copied: int  # outputs the runner copied into the referee's buffers (or never delivered)
    map_error: int  # the driver's answer to the last handle the referee could not open
    mapped: int  # allocations this seal mapped for the first time


class Check(TypedDict):
    op: Literal["check"]
    runner: int
    sets: list[int]
    overwritten: NotRequired[list[int]]  # host outputs: calls a later call's output overlaps
    late: NotRequired[list[int]]  # host outputs: calls written after they said they were done


class StepSamples(TypedDict):
    """Host outputs: elements of some calls' outputs of a runner's last window, each read by
    the parent when its call said it was done (before a later call could free it), as
    ``[call, output, element indices, their bytes in hex]``."""

    op: Literal["sampled"]
    runner: int
    samples: list[list[Any]]


class Agreed(TypedDict):
    agreed: list[int]  # the calls whose every output's sample passes the check's tolerance


class Prepare(TypedDict):
    op: Literal["prepare"]
    sets: list[SetRequest]


class SetIds(TypedDict):
    op: Literal["expect", "release"]
    sets: list[int]


class CheckResult(TypedDict):
    ok: bool
    abs: float
    rel: float
    message: str
    mutated: list[int]
    reused: bool  # its memory holds a later call's output (the trusted side saw them overlap)
    late: bool  # sampled bytes changed after the seal: work after the window closed
    compared: bool  # its outputs were compared with the reference (never a reused call's)
    step_agreed: NotRequired[bool]  # the parent's note (host): its step sample passed


class Checked(TypedDict):
    results: list[CheckResult]


# -- the worker ----------------------------------------------------------------------------


class WorkerInit(TypedDict):
    op: Literal["init"]
    init_seed: int
    outputs: list[OutputSpec]
    single: bool


class SettingsReply(TypedDict):
    settings_changed: SettingsChanged


class Attach(TypedDict):
    op: Literal["attach"]
    slots: list[SlotDesc]  # the runner's pool, opened once (on CUDA its arena's descriptor
    # comes with the message: ``SharedCuda.arena``)


class Trial(TypedDict):
    op: Literal["trial"]
    values: list[list[object]]  # slots 0 and 1: the non-tensor inputs


class TrialOutputs(TypedDict, total=False):
    outputs: list[OutputMeta]
    settings_changed: SettingsChanged
    at: list[list[list[int] | None]]  # host outputs: [address, bytes] in the runner's memory


class BurstRequest(TypedDict, total=False):
    op: Literal["burst"]
    values: list[list[object]]  # one per call, slot FIRST+J for call J: the non-tensor inputs
    first: int  # the slot of the request's first call (a window is released call by call)
    more: bool  # the request continues the window the last one opened
    noop: bool  # the sets handed over, nothing called (the reference runner's yardstick)
    copy: bool  # every output copied into the referee's buffer (a static output was seen)
    account: bool | str  # the runner times its own loop (diagnostics: ``window_diag.py``;
    # "times": its clock alone, no allocator statistics or GPU events, ``release_diag.py``)


class Delivered(TypedDict, total=False):
    """A runner's word on where its outputs lie (checked by the referee, never believed)."""

    handles: list[str]  # the allocations first named in this request (the window's table grows)
    where: list[list[list[int] | None]]
    at: list[list[list[int] | None]]  # host outputs: [address, bytes] in the runner's memory
    loop_ms: dict[str, float]  # the runner's own account of its loop, when asked (``account``)


class JudgedOutputs(TypedDict):
    outputs: list[OutputMeta]


class Finish(TypedDict):
    op: Literal["finish"]


class Empty(TypedDict):
    pass
