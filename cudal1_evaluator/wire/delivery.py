"""A runner's delivery split between the seal (inside the timed window) and the placing of
every output (after it). Torch-free: the parent uses it.

A runner's reply says where each output of its window lies: a table of allocation handles and,
per call, per output, ``[handle index, byte offset]`` or None (copied into the referee's
buffer). The seal must read the outputs of a few calls drawn after delivery, so it needs the
words of those calls only; resolving every call's (a driver mapping, a check of owner, bounds)
costs microseconds an output, and inside the clock that cost would be charged to every call of
every window. So the seal gets the drawn calls' words with the handles they name, and ``place``,
once the clock has stopped and before anything is compared, gets all of it.
"""

from __future__ import annotations

import bisect
import heapq
import random
from collections.abc import Iterable
from typing import Any

SAMPLED_CALLS = 2  # calls of a window whose outputs the seal reads, besides the last
MAX_HANDLES = 8192  # allocations one window may name (1024 calls, small outputs two a segment)


def is_index(value: Any, size: int) -> bool:
    """A place in a table of ``size``: a plain int (not a bool) in range."""
    return type(value) is int and 0 <= value < size


def sampled_calls(calls: int, rng: random.Random) -> list[int]:
    """The calls whose outputs the seal reads: the last one and ``SAMPLED_CALLS`` others
    drawn now (a runner that leaves any of them unfinished is caught; drawn after delivery,
    the runner cannot know which)."""
    if calls <= SAMPLED_CALLS + 1:
        return list(range(calls))
    return sorted({calls - 1, *rng.sample(range(calls - 1), SAMPLED_CALLS)})


def seal_words(handles: Any, where: Any, calls: list[int]) -> tuple[list[str], list[list[Any]]]:
    """The runner's words for ``calls`` only: the handles they name (renumbered) and
    ``[call, its outputs' places]`` pairs. A place that names no handle of the table becomes
    None (read from the referee's buffer); any other entry goes on as it is, for the referee
    to refuse (it believes none of it)."""
    table = handles[:MAX_HANDLES] if isinstance(handles, list) else []
    said = where if isinstance(where, list) else []
    renumbered: dict[int, int] = {}
    subset: list[str] = []
    pairs: list[list[Any]] = []
    for j in calls:
        entry = said[j] if j < len(said) else None
        pairs.append([j, _renumber(entry, table, renumbered, subset)])
    return subset, pairs


def _renumber(entry: Any, table: list[Any], renumbered: dict[int, int],
              subset: list[str]) -> Any:
    if not isinstance(entry, list):
        return entry
    out: list[Any] = []
    for loc in entry:
        if isinstance(loc, list) and len(loc) == 2 and is_index(loc[0], len(table)):
            if loc[0] not in renumbered:
                renumbered[loc[0]] = len(subset)
                subset.append(table[loc[0]])
            out.append([renumbered[loc[0]], loc[1]])
        else:
            out.append(None)  # not a place in the table: the output counts as not delivered
    return out


def overwritten(spans: Iterable[tuple[int, int, int]]) -> set[int]:
    """The calls whose output memory a later call's output overlaps, from ``(start, stop,
    call)`` spans in one address space: in each run of overlapping spans, every call but the
    last to write."""
    earlier: set[int] = set()
    cluster: set[int] = set()
    end = -1
    for start, stop, j in sorted(spans):
        if start >= end:
            earlier |= cluster - {max(cluster, default=-1)}
            cluster = set()
        cluster.add(j)
        end = max(end, stop)
    return earlier | (cluster - {max(cluster, default=-1)})


class LastWriters:
    """Which call's output lies last over each byte of one address space, from ``(start, stop,
    call)`` spans. A byte read of a call's output when it was done may change afterwards only
    where the output of a call that came later lies (``overwritten``): nothing else of the
    window writes there."""

    def __init__(self, spans: Iterable[tuple[int, int, int]]) -> None:
        self.bounds, self.calls = _last_writers(spans)

    def at(self, place: int) -> int:
        """The latest call whose output holds the byte at ``place``; -1 where none does."""
        k = bisect.bisect_right(self.bounds, place) - 1
        return self.calls[k] if k >= 0 else -1

    def later(self, place: int, call: int) -> bool:
        """Whether the output of a call after ``call`` holds the byte at ``place``: that call
        may have written it."""
        return self.at(place) > call


def _last_writers(spans: Iterable[tuple[int, int, int]]) -> tuple[list[int], list[int]]:
    """Sorted boundaries and, for the bytes from each to the next, the latest call whose span
    holds them (-1: none). One sweep, the spans that hold the current byte in a heap."""
    items = sorted((start, stop, j) for start, stop, j in spans if stop > start)
    bounds = sorted({p for start, stop, _ in items for p in (start, stop)})
    calls: list[int] = []
    holding: list[tuple[int, int]] = []  # (-call, stop): the latest call on top
    i = 0
    for bound in bounds:
        while i < len(items) and items[i][0] <= bound:
            heapq.heappush(holding, (-items[i][2], items[i][1]))
            i += 1
        while holding and holding[0][1] <= bound:  # ended: a span under the top waits its turn
            heapq.heappop(holding)
        calls.append(-holding[0][0] if holding else -1)
    return bounds, calls
