"""The talk protocol's messages and the shared-tensor descriptions, as TypedDicts (stdlib only).

These are the shapes the parent, the referee and the worker send each other (see
``cudal1_evaluator.wire.talk`` for the ops). The JSON encoding is the plain dict. Requests come
from the trusted parent; a reply from the worker is untrusted and is read with
``talk.read_*``, never trusted for its types.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

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
    """A CUDA IPC handle; the byte fields are base64 text (None where torch gives none)."""

    kind: Literal["cuda"]
    device: int
    handle: str | None
    size_bytes: int
    offset_bytes: int
    ref_handle: str | None
    ref_offset: int
    event: str | None
    event_sync: bool
    dtype: str
    shape: list[int]
    strides: list[int]
    offset: int


SharedDesc = SharedValue | SharedFile | SharedCuda


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


class RefereeInit(TypedDict):
    op: Literal["init"]
    init_seed: int
    probe_seed: int
    xdir: str
    # a referee for the matched reference alone: under the candidate's settings from its
    # first op on, as the candidate's process was (cuDNN's plan cache remembers the rest)
    matched: NotRequired[MatchedSettings]


class RefereeInfo(TypedDict, total=False):
    """The referee's init reply (total=False: the parent reads it with ``.get``)."""

    device: DeviceInfo
    versions: dict[str, str]
    tolerance: ToleranceInfo
    outputs: list[OutputSpec]


class SetRequest(TypedDict):
    id: int
    seed: int
    copies: int


class Prepare(TypedDict):
    op: Literal["prepare"]
    sets: list[SetRequest]


class Prepared(TypedDict):
    slots: dict[str, SlotDesc]  # "ID/K" -> the K-th copy of set ID


class Reference(TypedDict):
    op: Literal["reference"]
    sets: list[int]
    precision: Literal["strict", "matched"]


class Times(TypedDict):
    times_ms: list[float]


class SlotNames(TypedDict):
    op: Literal["seal", "check"]
    slots: list[str]


class CheckResult(TypedDict):
    ok: bool
    abs: float
    rel: float
    message: str
    mutated: list[int]


class Checked(TypedDict):
    results: list[CheckResult]


class Matched(MatchedSettings):
    op: Literal["matched"]


class Release(TypedDict):
    op: Literal["release"]
    sets: list[int]


# -- the worker ----------------------------------------------------------------------------


class WorkerInit(TypedDict):
    op: Literal["init"]
    init_seed: int
    outputs: list[OutputSpec]
    single: bool


class SettingsReply(TypedDict):
    settings_changed: SettingsChanged


class Trial(TypedDict):
    op: Literal["trial"]
    slots: list[SlotDesc]


class TrialOutputs(TypedDict):
    outputs: list[OutputMeta]
    settings_changed: SettingsChanged


class MapSlots(TypedDict):
    op: Literal["map"]
    slots: dict[str, SlotDesc]


class Unmap(TypedDict):
    op: Literal["unmap"]


class BurstRequest(TypedDict):
    op: Literal["burst"]
    names: list[str]


class BurstTimes(TypedDict):
    times_ms: list[float]
    late: int


class JudgedOutputs(TypedDict):
    outputs: list[OutputMeta]


class Finish(TypedDict):
    op: Literal["finish"]


class Empty(TypedDict):
    pass
