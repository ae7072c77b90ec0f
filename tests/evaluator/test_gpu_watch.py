"""The parent's watch of other processes' kernels on the timing GPU (``parent.gpu_watch``).

NVML needs the NVIDIA driver: here (no GPU) the watch must say it is off and why, and never
drop a round; the round accounting is tested on a watch whose samples are given."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from cudal1_evaluator.parent import gpu_watch
from cudal1_evaluator.parent.gpu_watch import GpuWatch, Other, SharedRounds


class GivenSamples(GpuWatch):
    """A watch whose other processes are the given (pid, start, end, SM %) spans."""

    def __init__(self, spans: list[tuple[int, int, int, int]]) -> None:
        super().__init__(None, None)
        self.spans = spans

    @property
    def on(self) -> bool:
        return True

    def others_during(self, start_us: int, ours: Callable[[], Iterable[int]]) -> list[Other]:
        mine = set(ours())
        return [Other(pid, share) for pid, _a, b, share in self.spans
                if b >= start_us and pid not in mine]


def test_without_a_driver_the_watch_is_off_and_says_why() -> None:
    watch = gpu_watch.open_watch("0f3c5a2e-0000-0000-0000-000000000000", [1])
    if gpu_watch._nvml() is not None:  # a host with the driver: covered by the GPU tests
        return
    assert not watch.on
    assert "NVML" in watch.why_off
    assert watch.others_during(0, lambda: set()) == []
    assert watch.busy_since(0) == []
    rounds = SharedRounds(watch, lambda: set())
    assert not rounds.overlapped(0)
    codes = {f.code: f.severity for f in rounds.flags()}
    assert codes == {"gpu_watch_off": "info"}


def test_a_round_beside_other_work_is_dropped_then_kept_and_flagged_past_the_cap() -> None:
    rounds = SharedRounds(GivenSamples([(4242, 100, 200, 87)]), lambda: {1, 2})
    assert not rounds.overlapped(250)  # its work ended before the span began
    for _ in range(gpu_watch.MAX_DROPPED):
        assert rounds.overlapped(150) and rounds.drop()
    assert rounds.overlapped(150) and not rounds.drop()
    flags = {f.code: f for f in rounds.flags()}
    assert flags["gpu_shared"].severity == "warn"
    assert "pid 4242 (up to 87 % of the SMs)" in flags["gpu_shared"].reason
    assert flags["gpu_shared_retimed"].severity == "info"
    assert f"{gpu_watch.MAX_DROPPED} timed round(s)" in flags["gpu_shared_retimed"].reason


def test_the_evaluations_own_processes_are_never_other_work() -> None:
    rounds = SharedRounds(GivenSamples([(7, 0, 10**9, 100)]), lambda: {7})
    assert not rounds.overlapped(0)
    assert rounds.flags() == []
