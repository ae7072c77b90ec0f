"""The one GPU a candidate's CUDA child sees on a host of several (``isolation.gpu_view``):
which nodes are covered, how the view is named to CUDA, and the cover itself in a real
mount namespace."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Mapping
from pathlib import Path

import pytest

from cudal1_evaluator.isolation import gpu_view

UUIDS = ["GPU-0a000000-0000-0000-0000-000000000000", "GPU-1b000000-0000-0000-0000-000000000001"]


def _proc(tmp_path: Path) -> Path:
    proc = tmp_path / "gpus"
    for minor, (bus, uuid) in enumerate(zip(["0000:19:00.0", "0000:3b:00.0"], UUIDS,
                                            strict=True)):
        (proc / bus).mkdir(parents=True, exist_ok=True)
        (proc / bus / "information").write_text(  # the driver writes the hex upper-case
            f"Model:           NVIDIA H200\nGPU UUID:        GPU-{uuid[4:].upper()}"
            f"\nBus Location:    {bus}\nDevice Minor:    {minor}\nGPU Excluded:    No\n")
    return proc


NODES = {0: "/dev/nvidia0", 1: "/dev/nvidia1"}


def _asked(answer: str) -> tuple[list[int], gpu_view.UuidOf]:
    asked: list[int] = []

    def uuid_of(index: int, env: Mapping[str, str]) -> str:
        asked.append(index)
        if not answer:
            raise RuntimeError("cuInit failed with CUDA error 100")
        return answer
    return asked, uuid_of


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    gpu_view._cache.clear()


def test_the_driver_list_gives_each_gpus_minor_by_uuid(tmp_path: Path) -> None:
    assert gpu_view.driver_minors(_proc(tmp_path)) == {UUIDS[0]: 0, UUIDS[1]: 1}
    assert gpu_view.driver_minors(tmp_path / "absent") == {}


def test_a_child_on_cuda_1_sees_its_gpu_alone_named_by_uuid(tmp_path: Path) -> None:
    asked, uuid_of = _asked(UUIDS[1])
    view, why = gpu_view.view_for("cuda:1", env={"CUDA_VISIBLE_DEVICES": "1,0"},
                                  uuid_of=uuid_of, nodes=NODES, proc_gpus=_proc(tmp_path))
    assert why == "" and view is not None
    assert (view.minor, view.covered) == (1, ("/dev/nvidia0",))
    assert view.env() == {"CUDA_VISIBLE_DEVICES": UUIDS[1]}
    assert asked == [1]
    again, _ = gpu_view.view_for("cuda:1", env={"CUDA_VISIBLE_DEVICES": "1,0"},
                                 uuid_of=uuid_of, nodes=NODES, proc_gpus=_proc(tmp_path))
    assert again == view and asked == [1]  # CUDA is asked once per device and environment
    gpu_view.view_for("cuda:1", env={}, uuid_of=uuid_of, nodes=NODES, proc_gpus=_proc(tmp_path))
    assert asked == [1, 1]


def test_nothing_to_hide_with_one_gpu_node_or_on_the_cpu(tmp_path: Path) -> None:
    asked, uuid_of = _asked(UUIDS[0])
    for device, nodes in (("cuda", {0: "/dev/nvidia0"}), ("cpu", NODES), ("cuda", {})):
        assert gpu_view.view_for(device, uuid_of=uuid_of, nodes=nodes,
                                 proc_gpus=_proc(tmp_path)) == (None, "")
    assert asked == []


def test_a_view_that_cannot_be_made_says_why(tmp_path: Path) -> None:
    asked, failing = _asked("")
    for _ in range(2):
        view, why = gpu_view.view_for("cuda", env={}, uuid_of=failing, nodes=NODES,
                                      proc_gpus=_proc(tmp_path))
        assert view is None and "error 100" in why and "stay reachable" in why
    assert asked == [0, 0]  # a failed probe is not kept: the next child asks again
    _, unknown = _asked("GPU-ffffffff-0000-0000-0000-000000000000")
    view, why = gpu_view.view_for("cuda", env={"CUDA_VISIBLE_DEVICES": "0"}, uuid_of=unknown,
                                  nodes=NODES, proc_gpus=_proc(tmp_path))
    assert view is None and "no node of GPU-ffffffff" in why
    view, why = gpu_view.view_for("cuda", env={"CUDA_VISIBLE_DEVICES": "MIG-1234"},
                                  uuid_of=unknown, nodes=NODES, proc_gpus=_proc(tmp_path))
    assert view is None and "MIG" in why


def test_the_job_inside_names_cuda_0() -> None:
    text = json.dumps({"device": "cuda:1", "candidate_source": "x = 1"})
    assert json.loads(gpu_view.job_inside(text)) == {"device": "cuda:0",
                                                       "candidate_source": "x = 1"}
    cpu = json.dumps({"device": "cpu"})
    assert gpu_view.job_inside(cpu) == cpu and gpu_view.job_inside("not json") == "not json"


def test_regular_files_named_like_gpu_nodes_are_not_gpus(tmp_path: Path) -> None:
    (tmp_path / "nvidia0").write_text("")
    (tmp_path / "nvidia1").mkdir()
    assert gpu_view.gpu_nodes(str(tmp_path)) == {}


@pytest.mark.skipif(os.geteuid() != 0, reason="mount namespaces need root here")
def test_a_covered_node_cannot_be_opened_in_the_namespace(tmp_path: Path) -> None:
    """The cover in a real mount namespace: the node reads as an empty file of mode 000,
    which a process without capabilities (here uid nobody) cannot open; the host's node is
    untouched and no scratch file is left."""
    node, scratch = tmp_path / "nvidia1", tmp_path / "scratch"
    node.write_text("the other GPU")
    node.chmod(0o666)
    scratch.mkdir()
    code = textwrap.dedent(f"""
        import ctypes, json, os
        from cudal1_evaluator.isolation import namespaces
        m = namespaces._Mount()
        if m.libc.unshare(namespaces.CLONE_NEWNS) != 0:
            raise SystemExit("unshare failed")
        m.mount(None, "/", None, namespaces._MS_REC | namespaces._MS_PRIVATE)
        namespaces.cover_nodes(m, [{str(node)!r}], {str(scratch)!r})
        seen = {{"root_reads": open({str(node)!r}).read(), "left": os.listdir({str(scratch)!r})}}
        os.setgid(65534); os.setuid(65534)
        try:
            open({str(node)!r}, "rb")
            seen["nobody"] = "opened"
        except OSError as exc:
            seen["nobody"] = exc.__class__.__name__
        print(json.dumps(seen))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[2], timeout=60)
    if "unshare failed" in done.stderr:
        pytest.skip("no mount namespace here")
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout)
    assert seen == {"root_reads": "", "left": [], "nobody": "PermissionError"}
    assert node.read_text() == "the other GPU"
