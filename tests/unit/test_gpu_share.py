"""The model server's GPUs, the room an evaluation needs, and the gate between the two.

``nvidia-smi`` is a real executable put on PATH (``tests/data/gpushare/nvidia-smi``, answering
from CSV files); ``/proc`` is a folder laid out like it, and once the real one (a socket this
test listens on).
"""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import pytest

from cudal1_evaluator.schema import ProbeResult, TensorSpec
from cudal1_tui.config import Settings
from cudal1_tui.engine.events import EngineError
from cudal1_tui.engine.gpu_share import GpuShare, stream_waits, timing_waits
from cudal1_tui.engine.lanes import LocalLanes, SlotLanes
from cudal1_tui.engine.quiet_gate import QuietGate
from cudal1_tui.engine.share_setup import open_share, share_for_lanes, shared_note
from cudal1_tui.gpushare import listeners, memory, smi
from cudal1_tui.gpushare.devices import physical_gpu
from cudal1_tui.gpushare.server_gpus import ServerGpus, detect, kind_of, local_port, parse_setting
from cudal1_tui.store.event_log import EventLog, overlaps, read_events

FAKE_SMI = Path(__file__).resolve().parents[1] / "data" / "gpushare" / "nvidia-smi"
UUID0 = "GPU-0aaaaaaa-1111-2222-3333-444444444444"
UUID1 = "GPU-1bbbbbbb-1111-2222-3333-444444444444"
GPUS_CSV = f"0, {UUID0}, 1200 MiB, 81559 MiB\n1, {UUID1}, 70000 MiB, 81559 MiB\n"
APPS_CSV = (f"4242, VLLM::EngineCore, 72000 MiB, {UUID0}\n"
            f"777, /usr/bin/python3, 900 MiB, {UUID1}\n")


@pytest.fixture
def fake_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fake ``nvidia-smi`` first on PATH; returns its data folder."""
    bin_dir, data = tmp_path / "bin", tmp_path / "smi"
    bin_dir.mkdir()
    data.mkdir()
    (bin_dir / "nvidia-smi").symlink_to(FAKE_SMI)
    (data / "gpus.csv").write_text(GPUS_CSV)
    (data / "apps.csv").write_text(APPS_CSV)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SMI_DIR", str(data))
    return data


def _tcp_row(port: int, inode: int, state: str = "0A") -> str:
    return (f"   0: 0100007F:{port:04X} 00000000:0000 {state} 00000000:00000000 00:00000000 "
            f"00000000  1000        0 {inode} 1 0000000000000000 100 0 0 10 0")


def _process(root: Path, pid: int, ppid: int, cmdline: str, sockets: tuple[int, ...] = ()
             ) -> None:
    folder = root / str(pid)
    (folder / "fd").mkdir(parents=True)
    (folder / "stat").write_text(f"{pid} (a (weird) name) S {ppid} {pid} {pid} 0 -1\n")
    (folder / "cmdline").write_text(cmdline.replace(" ", "\0") + "\0")
    (folder / "fd" / "0").symlink_to("/dev/null")
    for n, inode in enumerate(sockets, start=3):
        (folder / "fd" / str(n)).symlink_to(f"socket:[{inode}]")


@pytest.fixture
def proc(tmp_path: Path) -> Path:
    """A ``/proc``: vLLM's API server (pid 4200) listens on 8000; its engine core (4242)
    holds GPU 0; pid 900 listens on 9000 with a connection (not listening) on 8000."""
    root = tmp_path / "proc"
    (root / "net").mkdir(parents=True)
    header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid\n"
    (root / "net" / "tcp").write_text(header + "\n".join([
        _tcp_row(8000, 5551), _tcp_row(9000, 5552), _tcp_row(8000, 5553, state="01")]) + "\n")
    (root / "net" / "tcp6").write_text(header)
    _process(root, 1, 0, "/sbin/init")
    _process(root, 4200, 1, "/venv/bin/python3 /venv/bin/vllm serve Qwen/Qwen3-8B", (5551,))
    _process(root, 4242, 4200, "VLLM::EngineCore")
    _process(root, 900, 1, "python other.py", (5552, 5553))
    return root


# -- /proc -------------------------------------------------------------------------------


def test_the_listener_and_its_children_serve_the_port(proc: Path) -> None:
    assert listeners.listening_inodes(8000, proc) == {5551}  # the connection does not listen
    assert listeners.owners({5551}, proc) == {4200}
    assert listeners.parent_of(4242, proc) == 4200  # the name's parentheses do not confuse
    def serving(port: int) -> set[int]:
        return listeners.descendants(listeners.listeners(port, proc), proc)

    assert serving(8000) == {4200, 4242}
    assert serving(9000) == {900}
    assert serving(1234) == set()
    assert "vllm serve" in listeners.command_line(4200, proc)


def test_the_real_proc_finds_this_process_listening() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        assert os.getpid() in listeners.listeners(port)


# -- nvidia-smi and detection ------------------------------------------------------------


def test_the_fake_nvidia_smi_is_parsed(fake_smi: Path) -> None:
    apps = smi.compute_apps()
    assert apps is not None and [(a.pid, a.used_mib, a.gpu_uuid) for a in apps] == [
        (4242, 72000, UUID0), (777, 900, UUID1)]
    rows = smi.gpus()
    assert rows is not None and [(r.index, r.free_mib, r.total_mib) for r in rows] == [
        (0, 1200, 81559), (1, 70000, 81559)]
    assert smi.free_mib(1) == 70000 and smi.free_mib(5) is None
    calls = (fake_smi / "calls.log").read_text()
    assert "--query-compute-apps=pid,process_name,used_memory,gpu_uuid" in calls


def test_the_server_is_found_through_its_port(fake_smi: Path, proc: Path) -> None:
    found = detect("http://localhost:8000/v1", root=proc)
    assert found.gpus == (0,) and found.kind == "vllm" and found.pids == (4242,)
    assert found.uses(0) and not found.uses(1) and found.name == "vLLM"
    assert "pid 4242 VLLM::EngineCore" in found.how


def test_this_app_and_its_evaluator_children_are_never_the_server(fake_smi: Path,
                                                                  proc: Path) -> None:
    """A server in a process above the app (a benchmark serving replies while it runs the
    app): the app's own evaluator children on GPU 1 are not the server's work."""
    _process(proc, os.getpid(), 4200, "python -m cudal1_tui run --headless")
    _process(proc, 31000, os.getpid(), "python -m cudal1_evaluator _child run")
    (fake_smi / "apps.csv").write_text(f"4242, VLLM::EngineCore, 72000 MiB, {UUID0}\n"
                                       f"31000, /usr/bin/python3, 900 MiB, {UUID1}\n")
    found = detect("http://localhost:8000/v1", root=proc)
    assert found.gpus == (0,) and found.pids == (4242,)


def test_a_server_this_process_started_is_still_the_server(fake_smi: Path,
                                                           proc: Path) -> None:
    """A script that starts the server and then asks (the shared-GPU benchmark did, and
    found nothing while its own children were all excluded)."""
    _process(proc, os.getpid(), 1, "python benchmarks/shared_gpu.py")
    _process(proc, 5100, os.getpid(), "python generating_server.py --port 8100", (5561,))
    _process(proc, 5101, os.getpid(), "python -m cudal1_tui run --headless")
    _process(proc, 5102, 5101, "python -m cudal1_evaluator _child run")
    header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid\n"
    (proc / "net" / "tcp").write_text(header + _tcp_row(8100, 5561) + "\n")
    (fake_smi / "apps.csv").write_text(f"5100, /usr/bin/python3, 9000 MiB, {UUID1}\n"
                                       f"5102, /usr/bin/python3, 900 MiB, {UUID0}\n")
    found = detect("http://127.0.0.1:8100/v1", root=proc)
    assert found.gpus == (1,) and found.pids == (5100,), found.how


def test_a_server_in_a_container_is_found_by_its_name(fake_smi: Path, proc: Path) -> None:
    (fake_smi / "apps.csv").write_text(f"31337, ollama, 5000 MiB, {UUID1}\n")
    found = detect("http://127.0.0.1:11434/v1", root=proc)  # nothing here serves 11434
    assert found.gpus == (1,) and found.kind == "ollama"
    assert "named like a model server" in found.how


def test_detection_says_why_it_found_nothing(fake_smi: Path, proc: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    remote = detect("https://models.example.com/v1", root=proc)
    assert remote.gpus == () and "not on this machine" in remote.how
    (fake_smi / "apps.csv").write_text(f"777, /usr/bin/python3, 900 MiB, {UUID1}\n")
    assert detect("http://localhost:8000/v1", root=proc).how == (
        "no GPU process of the model server found")
    (fake_smi / "apps.csv").unlink()  # nvidia-smi fails, as without a driver
    assert detect("http://localhost:8000/v1", root=proc).how == "nvidia-smi is not available"
    monkeypatch.setenv("PATH", str(fake_smi))  # no nvidia-smi at all
    assert smi.compute_apps() is None


def test_the_setting_wins_over_detection(fake_smi: Path, proc: Path) -> None:
    fixed = detect("http://localhost:8000/v1", "1, 0", root=proc)
    assert fixed.gpus == (0, 1) and fixed.kind == "vllm" and "model_gpus" in fixed.how
    assert detect("http://localhost:8000/v1", "none", root=proc).gpus == ()
    assert not (fake_smi / "calls.log").exists()  # a setting asks nvidia-smi nothing
    assert parse_setting("auto") is None and parse_setting("2") == (2,)
    with pytest.raises(ValueError, match="model_gpus must be"):
        parse_setting("gpu0")


def test_names_ports_and_devices() -> None:
    assert [kind_of(n) for n in ("python -m sglang.launch_server", "llama-server -m x.gguf",
                                 "/bin/ollama runner", "transformers serve", "python")] == [
        "sglang", "llama.cpp", "ollama", "transformers", ""]
    assert local_port("http://localhost:30000/v1") == 30000
    assert local_port("http://127.0.0.1/v1") == 80 and local_port("http://10.1.2.3:8000") is None
    rows = [smi.GpuRow(0, UUID0), smi.GpuRow(1, UUID1)]
    assert physical_gpu("cuda", rows, {}) == 0 and physical_gpu("cpu", rows, {}) is None
    assert physical_gpu("cuda:1", rows, {"CUDA_VISIBLE_DEVICES": "3,2"}) == 2
    assert physical_gpu("cuda:0", rows, {"CUDA_VISIBLE_DEVICES": "GPU-1bbbbbbb"}) == 1
    assert physical_gpu("cuda:2", rows, {"CUDA_VISIBLE_DEVICES": "0,1"}) is None


# -- memory ------------------------------------------------------------------------------


def _probe(numel: int = 4096 * 4096, params: int = 0) -> ProbeResult:
    return ProbeResult(ok=True, inputs=[TensorSpec([numel], "float32", "cuda:0")],
                       outputs=[TensorSpec([numel], "float32", "cuda:0")],
                       parameter_count=params)


def test_the_need_is_estimated_from_the_probe() -> None:
    need = memory.estimate(_probe())  # 64 MiB in, 64 MiB out
    assert need.tensors_mib == (3 * 64 + 4 * 64) * 2 and need.weights_mib == 0
    fixed = memory.GPU_PROCESSES * memory.CONTEXT_MIB + memory.FLUSH_MIB
    assert need.mib == fixed + 896
    weighty = memory.estimate(_probe(numel=1, params=2**20))
    assert weighty.weights_mib == 8  # two copies, fp32


@pytest.mark.parametrize(("kind", "flag"), [
    ("vllm", "--gpu-memory-utilization"), ("sglang", "--mem-fraction-static"),
    ("llama.cpp", "--n-gpu-layers / -ngl"), ("ollama", "OLLAMA_GPU_OVERHEAD"),
])
def test_too_little_memory_names_the_servers_flag(kind: str, flag: str) -> None:
    need = memory.estimate(_probe())
    with pytest.raises(memory.GpuMemoryError) as err:
        memory.check(1200, need, 1024, gpu=0, server_kind=kind, server_shares=True)
    message = err.value.message
    assert message.startswith("too little free memory on GPU 0 for an evaluation: 1200 MiB "
                              f"free, about {need.mib + 1024} MiB needed")
    assert "holds memory on the same GPU" in message and flag in err.value.fix
    memory.check(need.mib + 1024, need, 1024, gpu=0, server_kind=kind, server_shares=True)


def test_an_unknown_holder_gets_every_servers_flag() -> None:
    with pytest.raises(memory.GpuMemoryError) as err:
        memory.check(100, memory.estimate(_probe()), 0, gpu=1)
    assert "holds memory" not in err.value.message
    for flag in ("--gpu-memory-utilization", "--mem-fraction-static", "--n-gpu-layers",
                 "OLLAMA_GPU_OVERHEAD", "nvidia-smi"):
        assert flag in err.value.fix


def test_the_check_before_an_evaluation_reads_nvidia_smi(fake_smi: Path, proc: Path) -> None:
    server = detect("http://localhost:8000/v1", root=proc)
    share = GpuShare("http://localhost:8000/v1#memory", server,
                     need=memory.estimate(_probe()), margin_mib=1024)
    with pytest.raises(memory.GpuMemoryError) as err:
        share.check_memory("cuda:0")  # 1200 MiB free beside vLLM's 72 GB
    assert "vLLM holds memory" in err.value.message
    assert "--gpu-memory-utilization" in str(err.value)
    share.check_memory("cuda:1")  # 70 GB free: fine
    share.check_memory("cpu")  # no GPU: nothing to check
    (fake_smi / "gpus.csv").unlink()
    share.check_memory("cuda:0")  # nvidia-smi cannot say: the evaluator's report stands


# -- the session's share -----------------------------------------------------------------


def test_open_share_detects_and_logs(fake_smi: Path, proc: Path, tmp_path: Path) -> None:
    settings = Settings(base_url="http://localhost:8000/v1")
    share = open_share(settings, tmp_path, _probe(), ["cuda:0", "cuda:1"], root=proc)
    assert share.shares("cuda:0") and not share.shares("cuda:1") and not share.shares("cpu")
    note = shared_note(share, ["cuda:0", "cuda:1"])
    assert note.startswith("vLLM uses GPU 0 (detected") and "(cuda:0)" in note
    (row,) = read_events(tmp_path / "events.jsonl")
    assert (row["event"], row["gpus"], row["kind"], row["shared"]) == (
        "server_gpus", [0], "vllm", ["cuda:0"])
    on_cpu = open_share(Settings(wait_for_model="auto"), tmp_path, _probe(), ["cpu"],
                        root=proc)
    assert on_cpu.server.how == "timing on the CPU" and not on_cpu.shares("cpu")
    always = open_share(Settings(wait_for_model="always"), tmp_path, None, ["cpu"], root=proc)
    assert always.shares("cpu") and shared_note(always, ["cpu"]).startswith(
        "wait_for_model = always")
    never = open_share(Settings(wait_for_model="never"), tmp_path, None, ["cuda:0"],
                       root=proc)
    assert not never.shares("cuda:0")


def test_a_session_is_told_at_once(fake_smi: Path, tmp_path: Path) -> None:
    """The real ``/proc`` (nothing serves port 1: vLLM is found by its process name) and the
    fake ``nvidia-smi``: the session hears that timing waits, and that GPU 0 lacks room."""
    said: list[EngineError] = []
    settings = Settings(base_url="http://localhost:1/v1")
    share = share_for_lanes(settings, tmp_path, _probe(), LocalLanes(["cuda:0", "cuda:1"]),
                            said.append)  # type: ignore[arg-type]
    assert share.shares("cuda:0") and not share.shares("cuda:1")
    info, error = said
    assert info.severity == "info" and info.message.startswith("vLLM uses GPU 0")
    assert error.severity == "error" and "too little free memory on GPU 0" in error.message
    assert "--gpu-memory-utilization" in error.fix
    on_ray = share_for_lanes(settings, tmp_path, _probe(), SlotLanes(4, "cuda"),
                             said.append)  # type: ignore[arg-type]
    assert not on_ray.shares("cuda") and len(said) == 2


def _share(tmp_path: Path, name: str, mode: str = "always") -> GpuShare:
    return GpuShare(f"http://gate-test/{name}", ServerGpus((), "test"), mode=mode,
                    log=EventLog(tmp_path / "events.jsonl"))


def test_a_timing_waits_for_the_streams_and_new_streams_wait_for_it(tmp_path: Path) -> None:
    share = _share(tmp_path, "order")
    share.note_lanes(["cpu"])
    cancel = threading.Event()
    said: list[str] = []
    stream_open, stream_go = threading.Event(), threading.Event()

    def stream(slot: int) -> None:
        with share.generating(1, slot, said.append, cancel) as started:
            assert started
            stream_open.set()
            stream_go.wait(30)

    def told(what: str) -> None:
        """Until ``what`` was said: each step waits for the last to be in place (fixed naps
        let a loaded host start the second stream before the timing waited)."""
        deadline = time.monotonic() + 30
        while what not in said and time.monotonic() < deadline:
            time.sleep(0.01)
        assert what in said, said

    first = threading.Thread(target=stream, args=(0,))
    first.start()
    stream_open.wait(30)

    def timed() -> None:
        with share.timing("r001s9-aaaaaa", "cpu", said.append, cancel) as quiet:
            assert quiet
            time.sleep(0.3)

    timer = threading.Thread(target=timed)
    timer.start()
    told(timing_waits("cpu"))
    second = threading.Thread(target=stream, args=(1,))  # arrives while the timing waits
    second.start()
    told(stream_waits("cpu"))
    stream_go.set()
    for thread in (first, timer, second):
        thread.join(30)
    assert timing_waits("cpu") in said and stream_waits("cpu") in said
    rows = read_events(tmp_path / "events.jsonl")
    assert [(r["event"], r["id"]) for r in rows] == [
        ("generation_started", "r1s0"), ("generation_ended", "r1s0"),
        ("timing_started", "r001s9-aaaaaa"), ("timing_ended", "r001s9-aaaaaa"),
        ("generation_started", "r1s1"), ("generation_ended", "r1s1")]
    assert overlaps(rows) == []


def test_a_cancel_ends_the_wait_and_an_unshared_lane_never_waits(tmp_path: Path) -> None:
    gate = QuietGate()
    cancel = threading.Event()
    assert gate.begin_stream(lambda _: None, lambda: None, cancel)
    threading.Timer(0.2, cancel.set).start()
    assert not gate.begin_timing(lambda _: None, lambda: None, cancel)
    assert gate.waiting == 0 and gate.timing == 0
    share = _share(tmp_path, "never", mode="never")
    with (share.generating(1, 0, print, threading.Event()),
          share.timing("r001s1-bbbbbb", "cuda:0", print, threading.Event()) as quiet):
        assert quiet  # not shared: times at once, and the log shows the overlap
    assert len(overlaps(read_events(tmp_path / "events.jsonl"))) == 1
