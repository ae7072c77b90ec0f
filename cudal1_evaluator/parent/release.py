"""A timed window's calls, released one at a time (round 28).

A window's input sets used to sit in the runner's slots before its first call: a candidate
could read them all at call 0 and batch the window (the reference's own one-row ``nn.Linear``
read 6-9x). Now call ``j``'s set becomes visible to the runner only once call ``j-1``'s
output is in trusted hands: on a host, sampled by the parent from the runner's memory (read
whole after the window, the runner stopped; a sampled byte that changed makes the call
``late``), and the next set handed over as a file of its own (a descriptor, never a name:
``host_set``); on a
GPU, read by the referee at places drawn then (``step``: a call said done early is caught
later, ``late``), and the next set copied into its slot from where no runner can map it.
The clock runs across the whole window: every call, every hand-over and every step. What is
credited back, each at most what the reference runner's take (``credit``): the trusted
steps, in full; each request's hand-over (measured on the reference runner with no call:
``noop``), within the window's cap on hand-off (``Burst.mean_ms``).

This module holds the pieces with no state of the conductor's: the request of one call, the
merge of the runner's replies into one word for the seal, and the credits.
"""

from __future__ import annotations

import contextlib
import resource
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from cudal1_evaluator.wire.talk import Reply

STAGE_CHUNK = 200  # host sets staged per request: their descriptors fit one message


def call_message(j: int, plain: list[object], copy: bool, account: bool | str,
                 noop: bool = False
                 ) -> dict[str, object]:
    """Call ``j`` of a window: its non-tensor values, its slot, whether it opens the window
    (``noop``: the set handed over and nothing called, on the reference runner only: what a
    call's hand-over costs an honest runner)."""
    message: dict[str, object] = {"op": "burst", "values": [plain], "first": j, "more": j > 0,
                                  "copy": copy, "account": account}
    if noop:
        message["noop"] = True
    return message


@dataclass
class Released:
    """What the trusted side timed of a window's calls, one entry a call (ms): the request
    (the set handed over, the call, the reply) and the trusted step after it (host: the
    parent's sample of the outputs; GPU: the referee's sample and next copy)."""

    requests: list[float] = field(default_factory=list)
    steps: list[float] = field(default_factory=list)


def credit(timed: Sequence[float], honest: Sequence[float]) -> float:
    """What of ``timed`` comes off a window's wall time: each at most the median of
    ``honest`` (what the reference runner's take), by one rule for every side. Work of a
    runner's that lengthens one is not credited."""
    if not timed or not honest:
        return 0.0
    most = statistics.median(honest)
    return sum(min(ms, most) for ms in timed)


def empty_word() -> Reply:
    return {"handles": [], "where": [], "at": []}


def merge(into: Reply, reply: Reply) -> None:
    """One call's reply into the window's word: the allocations it named first (appended,
    so the places of earlier calls keep their numbers) and its one call's places. Anything
    malformed becomes nothing (the referee believes none of it anyway)."""
    handles = reply.get("handles")
    if isinstance(handles, list):
        into["handles"] += handles
    for key in ("where", "at"):
        said = reply.get(key)
        into[key].append(said[0] if isinstance(said, list) and said else None)
    spent = reply.get("loop_ms")
    if isinstance(spent, dict):
        total = into.setdefault("loop_ms", {})
        for name, ms in spent.items():
            if isinstance(ms, int | float):
                total[name] = total.get(name, 0.0) + ms


def room_for_sets(count: int, spare: int = 256) -> None:
    """This process's descriptor limit raised (towards its hard limit) so a host window's
    ``count`` set files fit beside what it holds already; a limit that cannot be raised
    leaves the staging to fail with its own clear error."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = count + spare
    if soft != resource.RLIM_INFINITY and soft < wanted:
        top = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (top, hard))


def sets_in_chunks(ids: Sequence[int]) -> list[tuple[int, list[int]]]:
    """(first slot, ids) for each staging request of a host window."""
    return [(k, list(ids[k:k + STAGE_CHUNK])) for k in range(0, len(ids), STAGE_CHUNK)]
