"""The OS sandbox layers, each applied in a throwaway subprocess (never in the test process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cudal1_evaluator.isolation import landlock, startup_check

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = """
import json, os, socket, sys
from cudal1_evaluator.isolation import confine
writable, layers = sys.argv[1], sys.argv[2]
state = confine.apply([writable], private=[], layers=layers)
out = {"summary": state.summary(), "layers": state.layers, "uid": os.getuid()}
def attempt(path):
    try:
        with open(path, "w") as fh:
            fh.write("x")
        return "written"
    except OSError as exc:
        return exc.strerror
out["inside"] = attempt(os.path.join(writable, "ok.txt"))
out["outside"] = attempt(os.path.join(os.path.dirname(writable), "outside.txt"))
try:
    socket.create_connection(("127.0.0.1", 9), timeout=1)
    out["tcp"] = "connected"
except OSError as exc:
    out["tcp"] = str(exc)
print(json.dumps(out))
"""


def _confined(tmp_path: Path, layers: str, python: str = sys.executable) -> dict[str, object]:
    writable = tmp_path / "writable"
    writable.mkdir()
    os.chmod(tmp_path, 0o755)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([python, "-c", SCRIPT, str(writable), layers], capture_output=True,
                          text=True, env=env, timeout=60, check=True)
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_landlock_allows_writes_only_in_the_given_dirs(tmp_path: Path) -> None:
    if not landlock.abi_version()[0]:
        pytest.skip(landlock.abi_version()[1])
    found = _confined(tmp_path, "auto")
    assert found["inside"] == "written"
    assert found["outside"] != "written"
    assert not (tmp_path / "outside.txt").exists()
    assert "landlock" in str(found["summary"])
    assert found["tcp"] != "connected"


def test_mount_namespace_fallback(tmp_path: Path) -> None:
    found = _confined(tmp_path, "mountns")
    layers = found["layers"]
    assert isinstance(layers, dict)
    if "files" not in layers:
        pytest.skip(f"no mount namespace here: {found['summary']}")
    assert found["inside"] == "written"
    assert found["outside"] != "written"


def test_off_says_so(tmp_path: Path) -> None:
    found = _confined(tmp_path, "off")
    assert found["outside"] == "written"
    assert "turned off" in str(found["summary"])


@pytest.mark.skipif(os.geteuid() != 0, reason="the separate uid applies to root only")
def test_root_drops_to_nobody_when_the_interpreter_is_readable(tmp_path: Path) -> None:
    """The system Python (world-readable) shows the uid switch; an interpreter under /root
    (this machine's pyenv) shows a clear reason instead."""
    system = "/usr/bin/python3"
    if not Path(system).exists():
        pytest.skip("no system python3")
    found = _confined(tmp_path, "uid", python=system)
    summary = str(found["summary"])
    if found["uid"] == 0:
        assert "no separate uid" in summary and "not readable" in summary
    else:
        assert found["uid"] == 65534 and "nobody" in summary


@pytest.mark.skipif(os.geteuid() != 0, reason="the separate uid applies to root only")
def test_confining_as_auto_keeps_the_uid_and_says_so(tmp_path: Path) -> None:
    """``auto`` keeps the uid that started the child; the parent asks for ``uid`` where a child
    started as root must drop (``sandbox_layers.layers_for_root``)."""
    found = _confined(tmp_path, "auto")
    assert found["uid"] == os.geteuid()
    assert "stays uid 0" in str(found["summary"]) and "CUDAL1_SANDBOX=uid" in str(found["summary"])


def test_a_root_started_candidate_mode_child_drops_on_cpu_and_cuda_alike() -> None:
    from cudal1_evaluator.isolation.sandbox_layers import layers_for_root

    root = os.geteuid() == 0
    assert layers_for_root("auto", "run") == ("uid" if root else "auto")
    assert layers_for_root("auto", "build") == ("uid" if root else "auto")
    assert layers_for_root("uid", "referee") == "auto"  # trusted: never drops
    assert layers_for_root("off", "run") == "off"


def test_a_cuda_child_stays_root_where_nobody_could_not_open_the_gpu(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Device nodes of mode 0660 (a ``video`` group) would keep ``nobody`` from starting CUDA:
    there a root-started CUDA child keeps uid 0 (capabilities dropped); a CPU child drops."""
    from cudal1_evaluator.isolation import sandbox_layers

    for name, mode in (("nvidiactl", 0o666), ("nvidia0", 0o666), ("nvidia1", 0o660)):
        (tmp_path / name).touch()
        (tmp_path / name).chmod(mode)
    assert not sandbox_layers.gpu_nodes_open_to_all(str(tmp_path))
    (tmp_path / "nvidia1").chmod(0o666)
    assert sandbox_layers.gpu_nodes_open_to_all(str(tmp_path))
    assert sandbox_layers.gpu_nodes_open_to_all(str(tmp_path / "none"))  # no GPU: no bar
    monkeypatch.setattr(sandbox_layers, "gpu_nodes_open_to_all", lambda: False)
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert sandbox_layers.layers_for_root("auto", "run", '{"device": "cuda"}') == "auto"
    assert sandbox_layers.layers_for_root("auto", "run", '{"device": "cpu"}') == "uid"


def test_startup_record_names_what_changed(tmp_path: Path) -> None:
    (tmp_path / "a.pth").write_text("import os\n")
    recorded = startup_check.record(str(tmp_path))  # site dirs and this "PYTHONPATH" dir
    assert startup_check.differences(recorded) == []
    (tmp_path / "a.pth").write_text("import evil\n")
    (tmp_path / "sitecustomize.py").write_text("import evil\n")
    problems = startup_check.differences(recorded)
    assert any("a.pth was changed" in p for p in problems)
    assert any("sitecustomize.py was added" in p for p in problems)


NARROW = """
import json, os, sys
from cudal1_evaluator.isolation import confine
cache, other = sys.argv[1], sys.argv[2]
confine.apply([cache, other], private=[])
own = os.path.join(cache, "own")
os.makedirs(own, exist_ok=True)
confine.narrow_writes([own])
def attempt(path):
    try:
        with open(path, "w") as fh:
            fh.write("x")
        return "written"
    except OSError as exc:
        return exc.strerror
print(json.dumps({name: attempt(os.path.join(d, "f")) for name, d in
                  (("own", own), ("cache", cache), ("other", other))}))
"""


def test_narrowing_keeps_unrelated_dirs_and_drops_the_cache_root(tmp_path: Path) -> None:
    if not landlock.abi_version()[0]:
        pytest.skip(landlock.abi_version()[1])
    cache, other = tmp_path / "cache", tmp_path / "exchange"
    cache.mkdir()
    other.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", NARROW, str(cache), str(other)],
                          capture_output=True, text=True, env=env, timeout=60, check=True)
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["own"] == "written" and found["other"] == "written"
    assert found["cache"] != "written"


SPAWN = """
import sys
from cudal1_evaluator.isolation.startup_check import child_start
child_start("/nonexistent/job.json")  # no config: only site, as a child started by hand
import multiprocessing as mp
def probe(q):
    import pytest
    q.put(pytest.__name__)
if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=probe, args=(q,))
    p.start()
    print(q.get(timeout=60))
    p.join()
"""


def test_children_started_with_dash_s_still_find_site_packages(tmp_path: Path) -> None:
    """A child runs ``python -S``; multiprocessing's spawn passes ``-S`` on to its children."""
    script = tmp_path / "spawn_probe.py"
    script.write_text(SPAWN)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-S", str(script)], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.stdout.strip().endswith("pytest"), done.stderr[-2000:]
