"""The runtime side of cudal1-tui: compile, verify and time candidates honestly.

Importing this package never imports torch: the schema and the process launcher
are torch-free so the app (and its lane processes) can use them. Torch is imported only inside the
evaluator's own subprocesses (``python -m cudal1_evaluator``).
"""

from cudal1_evaluator.schema import (
    DEVICE_FORMS,
    JOB_VERSION,
    RESULT_VERSION,
    REWARDS,
    TOLERANCES,
    BuildOutcome,
    Flag,
    Job,
    ProbeJob,
    ProbeResult,
    Result,
    RewardSpec,
    TensorSpec,
    TimingSummary,
    TrialReport,
    parse_device,
    parse_reward,
    parse_tolerance,
)

__all__ = [
    "DEVICE_FORMS",
    "JOB_VERSION",
    "RESULT_VERSION",
    "REWARDS",
    "TOLERANCES",
    "BuildOutcome",
    "Flag",
    "Job",
    "ProbeJob",
    "ProbeResult",
    "Result",
    "RewardSpec",
    "TensorSpec",
    "TimingSummary",
    "TrialReport",
    "parse_device",
    "parse_reward",
    "parse_tolerance",
]
