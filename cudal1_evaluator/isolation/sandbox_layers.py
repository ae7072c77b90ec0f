"""The parent's side of the OS sandbox (stdlib only): which dirs a child may write, the
``bwrap`` wrapper where the child cannot confine itself, and the probe behind ``doctor``.

The child confines itself (``isolation.confine``) with landlock or a mount namespace; only when
the kernel offers neither and ``bwrap`` is installed does the parent wrap the child in it.
``CUDAL1_SANDBOX`` (``auto``, ``uid``, ``mountns``, ``off``) overrides the choice: ``uid`` is
``auto`` plus a separate uid for children started as root.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from cudal1_evaluator.isolation import landlock, lifetime
from cudal1_evaluator.parent.build_cache import default_build_dir

_PROBE = """
import json, sys
from cudal1_evaluator.isolation import confine
state = confine.apply([sys.argv[1]], private=[sys.argv[1]], layers=sys.argv[2])
print(json.dumps({"layers": state.layers, "missing": state.missing}))
"""


def sandbox_dirs(root: Path, job_text: str | None, extra: Sequence[str] = ()) -> list[str]:
    """The dirs a child may write: its private root, the build cache (the job's, else the
    default) and ``extra`` (e.g. an exchange dir of the parent's)."""
    dirs = [str(root), str(default_build_dir()), *extra]
    if job_text:
        try:
            build_dir = json.loads(job_text).get("build_dir")
        except (ValueError, AttributeError):
            build_dir = None
        if isinstance(build_dir, str) and build_dir:
            dirs.append(build_dir)
    for path in dirs[1:]:
        Path(path).mkdir(parents=True, exist_ok=True)  # rules need existing dirs
    return [os.path.realpath(p) for p in dict.fromkeys(dirs)]


def writable_for(mode: str) -> tuple[str, ...]:
    """Extra dirs a child of ``mode`` may write. The referee (trusted: it never imports candidate
    code) creates the exchange files inside the worker's exchange dir, so it may write under the
    temp dir where every child's private dir lives and under the shared-memory base."""
    if mode != "referee":
        return ()
    shared = lifetime.exchange_base()
    return (tempfile.gettempdir(),) + ((str(shared),) if shared is not None else ())


def requested_layers() -> str:
    value = os.environ.get("CUDAL1_SANDBOX", "auto").strip().lower()
    return value if value in ("auto", "uid", "mountns", "off") else "auto"


def outer_sandbox(writable: list[str]) -> tuple[list[str], str]:
    """(argv prefix, the layers the child applies itself): ``bwrap`` without landlock."""
    layers = requested_layers()
    bwrap = shutil.which("bwrap")
    if layers not in ("auto", "uid") or landlock.abi_version()[0] or bwrap is None:
        return [], layers
    prefix = [bwrap, "--ro-bind", "/", "/", "--dev-bind", "/dev", "/dev", "--proc", "/proc",
              "--unshare-net", "--die-with-parent"]
    for path in writable:
        prefix += ["--bind", path, path]
    return [*prefix, "--"], "bwrap"


def probe() -> tuple[bool, str]:
    """(file system confined?, what a child gets here), measured in a throwaway process."""
    with tempfile.TemporaryDirectory(prefix="cudal1-sandbox-probe-") as tmp:
        package_root = str(Path(__file__).resolve().parents[2])
        env = {**os.environ, "PYTHONPATH": package_root}
        try:
            out = subprocess.run([sys.executable, "-c", _PROBE, tmp, requested_layers()],
                                 capture_output=True, text=True, timeout=30, env=env,
                                 check=True).stdout
            found = json.loads(out.strip().splitlines()[-1])
        except (OSError, subprocess.SubprocessError, ValueError, IndexError) as exc:
            return False, f"the sandbox probe failed: {exc}"
    layers, missing = found["layers"], found["missing"]
    if outer_sandbox([])[1] == "bwrap":
        layers["files"] = "bubblewrap (read-only root, no network)"
    text = "; ".join(f"{k}: {v}" for k, v in layers.items())
    text += "".join(f"; no {k} ({v})" for k, v in missing.items())
    return "files" in layers, text
