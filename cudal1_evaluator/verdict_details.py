"""The shapes of a verdict's detail fields (stdlib only): the device, the tolerance, the
precision, the settings a candidate changed and its kernel profile, as stored in results.

Every TypedDict here is ``total=False``: results written by earlier versions may lack keys,
and readers use ``.get``. The JSON encoding is the plain dict, unchanged.
"""

from __future__ import annotations

from typing import TypedDict

# A setting's value as the snapshot renders it: a JSON scalar, or a list of them (a tuple).
SettingValue = bool | int | float | str | None | list["SettingValue"]


class SettingChange(TypedDict):
    before: SettingValue
    after: SettingValue


SettingsChanged = dict[str, SettingChange]


class PrecisionInfo(TypedDict, total=False):
    candidate: str  # fp32 | tf32 | fp16 | bf16 | mixed
    # baseline (earlier results: fp32-strict) | tf32 | autocast-fp16 | autocast-bf16
    reference: str
    settings: SettingsChanged  # the precision flags the candidate changed
    autocast: str | None  # fp16 | bf16 | None
    observed: list[str]  # reduced floating dtypes seen reaching the candidate's ops
    source_hint: str  # fp16 | bf16 | fp16+bf16: what the source mentions (decides nothing)
    baseline: str  # the timed reference's settings, e.g. "eager, PyTorch defaults: ..."


class DtypeTolerance(TypedDict):
    atol: float
    rtol: float
    atol_scaled_by: str


class ToleranceInfo(TypedDict, total=False):
    preset: str
    rule: str
    by_dtype: dict[str, DtypeTolerance]
    integers: str
    nan_inf: str
    judged_against: str
    baseline_settings: dict[str, bool | str]  # the referee's strict fp32 switches
    baseline_floor: float  # tol at least: twice the timed baseline's own distance from strict


class DeviceInfo(TypedDict, total=False):
    type: str  # "cpu" or "cuda"
    index: int | None
    name: str
    capability: str | None
    cuda: str | None
    threads: int
    memory_gb: float
    memory_gib: float  # the probe's spelling
    sm_count: int
    l2_mb: float
    driver: str  # the NVIDIA driver, added by the parent
    uuid: str  # the GPU's UUID as torch spells it (NVML adds "GPU-"): the parent's watch


# one kernel as the profile stores it: [name, total microseconds, call count]
KernelRow = list[str | float | int]


class ProfileSummary(TypedDict, total=False):
    kernels: list[KernelRow]
    reference_kernels: list[KernelRow]
    candidate_gpu_us: float
    reference_gpu_us: float
    candidate_kernel_share: float
    own_kernel_names: list[str]
    fallback_taken: bool
