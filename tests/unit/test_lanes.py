"""Timing lanes, the fleet's choices and the problem list of ``cudal1-tui run DIR``.

Real threads and real ``flock`` files (under a temporary cache dir); no evaluator.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from cudal1_tui.cli.problem_files import expand
from cudal1_tui.cli.run_report import StageUse, bottleneck
from cudal1_tui.engine.fleet import cluster_address, local_fleet, make_fleet, parse_gpus
from cudal1_tui.engine.lanes import LocalLanes, SlotLanes
from cudal1_tui.engine.pool import BuildQueue, EvalPool
from cudal1_tui.errors import FleetError


@pytest.fixture(autouse=True)
def private_locks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Device locks under this test's temp dir, never the user's cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def _hammer(lanes: LocalLanes | SlotLanes, jobs: int) -> tuple[dict[str, int], int, list[str]]:
    """``jobs`` threads each hold a lane for a moment; per device the most holders at once,
    the most lanes busy at once, and the devices used."""
    lock = threading.Lock()
    now: dict[str, int] = {}
    peak: dict[str, int] = {}
    busy = [0, 0]  # now, peak
    used: list[str] = []

    def work() -> None:
        with lanes.hold("test") as lane:
            assert lane is not None
            with lock:
                now[lane.device] = now.get(lane.device, 0) + 1
                peak[lane.device] = max(peak.get(lane.device, 0), now[lane.device])
                busy[0] += 1
                busy[1] = max(busy[1], busy[0])
                used.append(lane.device)
            time.sleep(0.05)
            with lock:
                now[lane.device] -= 1
                busy[0] -= 1

    threads = [threading.Thread(target=work) for _ in range(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return peak, busy[1], used


def test_local_lanes_never_put_two_holders_on_one_device() -> None:
    lanes = LocalLanes(["cuda:0", "cuda:1", "cuda:0"])  # a repeat is one lane
    assert lanes.width == 2
    peak, most, used = _hammer(lanes, 12)
    assert peak == {"cuda:0": 1, "cuda:1": 1}
    assert most == 2 and len(used) == 12
    usage = {u.device: u for u in lanes.usage()}
    assert sum(u.evaluations for u in usage.values()) == 12
    assert all(u.busy_s > 0.04 for u in usage.values())


def test_a_lane_counts_its_time_by_what_held_it() -> None:
    """The throughput report tells a problem's reference probe from an evaluation."""
    lanes = LocalLanes(["cuda:7"])
    with lanes.hold("probe of relu", kind="probe") as lane:
        assert lane is not None
        time.sleep(0.02)
    for _ in range(2):
        with lanes.hold("an evaluation"):
            time.sleep(0.01)
    [use] = lanes.usage()
    assert use.evaluations == 3 and use.holds_by_kind == {"probe": 1, "evaluation": 2}
    assert use.busy_by_kind["probe"] >= 0.02 and use.busy_by_kind["evaluation"] >= 0.02
    assert abs(sum(use.busy_by_kind.values()) - use.busy_s) < 1e-9


def test_slot_lanes_bound_the_work_in_flight() -> None:
    lanes = SlotLanes(3, "cuda")
    peak, most, used = _hammer(lanes, 9)
    assert most == 3 and set(used) == {"cuda"} and peak == {"cuda": 3}


def test_a_cancel_while_waiting_for_a_lane_yields_none() -> None:
    lanes = LocalLanes(["cpu"])
    cancel = threading.Event()
    waits: list[str] = []
    got: list[object] = []
    with lanes.hold("first") as lane:
        assert lane is not None

        def second() -> None:
            with lanes.hold("second", waits.append, cancel) as other:
                got.append(other)

        thread = threading.Thread(target=second)
        thread.start()
        # cancelled once it says it waits: after a fixed nap a loaded host could still have
        # the thread on its way, and a cancel set before it asks for the lane shows no wait
        deadline = time.monotonic() + 30
        while not waits and time.monotonic() < deadline:
            time.sleep(0.01)
        cancel.set()
        thread.join(30)
    assert got == [None] and waits and "timing lane" in waits[0]


def test_pools_of_one_fleet_share_lanes_and_builds() -> None:
    lanes, builds = LocalLanes(["cuda:0", "cuda:1"]), BuildQueue(2)
    pools = [EvalPool("cuda", holder=f"p{i}", lanes=lanes, builds=builds) for i in range(3)]
    seen: list[str] = []
    lock = threading.Lock()

    def evaluate(pool: EvalPool) -> str:
        with pool.on_lane() as device:
            assert device is not None
            with lock:
                seen.append(device)
            time.sleep(0.02)
            return device

    futures = [p.submit(lambda: 1, lambda _, p=p: evaluate(p)) for p in pools for _ in range(4)]
    assert {f.result(30) for f in futures} == {"cuda:0", "cuda:1"}
    assert builds.builds == 12
    pools[0].shutdown()  # one session closing leaves the shared build threads to the rest
    assert pools[1].submit(lambda: 2, lambda value: value).result(10) == 2
    for pool in pools[1:]:
        pool.shutdown()
    builds.shutdown(wait=True)


def test_parse_gpus() -> None:
    assert parse_gpus("0,1") == [0, 1]
    assert parse_gpus("0-3") == [0, 1, 2, 3]
    assert parse_gpus("2, 0-1,2") == [2, 0, 1]
    for bad in ("", "a", "1-b", ","):
        with pytest.raises(FleetError):
            parse_gpus(bad)


def test_cluster_address_flag_then_environment() -> None:
    assert cluster_address(None, {}) is None
    assert cluster_address(None, {"RAY_ADDRESS": "10.0.0.1:6379"}) == "10.0.0.1:6379"
    assert cluster_address("ray://h:10001", {"RAY_ADDRESS": "x:1"}) == "ray://h:10001"
    assert cluster_address("local", {"RAY_ADDRESS": "x:1"}) is None


def test_cpu_host_has_one_lane_and_gpus_need_a_gpu() -> None:
    fleet = local_fleet("cpu", None)
    assert fleet.width == 1 and fleet.device == "cpu" and "CPU" in fleet.label
    fleet.close()
    with pytest.raises(FleetError, match="pick one"):
        local_fleet("cpu", [0])
    with pytest.raises(FleetError, match="--gpus"):
        make_fleet("auto", [0], "ray://h:10001")


def test_expand_directories_and_files(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "b.py").write_text("x = 1\n")
    (tmp_path / "__init__.py").write_text("")
    (tmp_path / "notes.txt").write_text("")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "c.py").write_text("x = 1\n")
    (tmp_path / "empty").mkdir()
    listed = expand([tmp_path, tmp_path / "a.py", tmp_path / "sub" / "c.py",
                     tmp_path / "gone.py", tmp_path / "empty"])
    assert [p.name for p in listed.files] == ["a.py", "b.py", "c.py"]
    assert listed.missing == [tmp_path / "gone.py"] and listed.empty == [tmp_path / "empty"]


def test_bottleneck_names_the_busy_stage() -> None:
    assert "lanes" in bottleneck(StageUse(90, 0.9, 2), StageUse(10, 0.1, 8))
    assert bottleneck(StageUse(10, 0.3, 2), StageUse(80, 0.8, 8)) == "CPU builds"
    assert "model server" in bottleneck(StageUse(10, 0.3, 2), StageUse(10, 0.1, 8))
