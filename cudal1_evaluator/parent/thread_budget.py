"""One thread budget for every side (stdlib only): on a host, the reference is also timed on
one intra-op thread, and the speedup is the lowest against any reference timed.

A candidate may run fewer threads than the reference (``torch.set_num_threads(1)`` at
import, or a single-threaded kernel of its own). Where the cores are taken by other work,
the reference's threads then stall at OpenMP barriers while the candidate's one thread does
not: an honest copy of the reference read 6.8-8.9x on a 2-core host with one core busy
(round 29). Guessing the candidate's thread count from what its process ran was beaten at
once (round 30: decoy processes burned CPU in the untimed rounds the guess was made from,
then the timed ones ran one thread, 7.3-9.9x): nothing the candidate does decides whether
the one-thread reference is timed. Wherever torch runs more than one thread, it always is,
interleaved in the same rounds as the others, under the candidate's precision settings
like the matched reference, and the headline speedup is the lowest (``verdict._speedups``).
On a quiet host a reference held to one thread is no faster, and the speedup stays what it
was; on a busy one, an honest candidate that runs torch's default threads reads slower
than the reference on one thread, as it is there.
"""

from __future__ import annotations

from cudal1_evaluator.wire.talk_messages import RefereeInfo

NAME = "one_thread"  # the side (``conduct.RUNNER``) and the timing's key suffix


def wanted(device: str, reference_threads: int) -> bool:
    """Whether the reference is also timed on one thread: on a host where torch runs more
    than one (``reference_threads``: torch's count in the referee, the same environment)."""
    return not device.startswith("cuda") and reference_threads > 1


def reference_threads(info: RefereeInfo) -> int:
    """Torch's intra-op threads in the referee (a trusted process, the runners' environment)."""
    return int(info.get("device", {}).get("threads") or 1)


def flag_reason(reference_threads: int, lowest: bool) -> str:
    said = (f"the reference was also timed on one intra-op thread (torch runs "
            f"{reference_threads} here): the speedup is the lowest against any reference")
    if lowest:
        said += (" and the one-thread reference was the fastest: the cores were busy with "
                 "other work, where fewer threads do not stall at barriers")
    return said
