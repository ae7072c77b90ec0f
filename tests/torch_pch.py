"""A precompiled ``torch/extension.h`` for the suite's C++ builds (tests only).

Every ``load_inline`` of a candidate parses ``torch/extension.h`` again: on a 2-core CI box
that is ~30 of a trivial extension's ~45 s, and the suite builds dozens of candidates. GCC
uses ``DIR/torch/extension.h.gch`` when it finds ``torch/extension.h`` in ``DIR`` first, and
``CPATH`` dirs are searched before torch's ``-isystem`` dirs. So the session builds one
precompiled header per optimisation level the suite's candidates use, in a dir of its own
outside torch's install, and names that dir in ``CPATH``; the evaluator's children keep
``CPATH`` and see it read-only (``isolation.namespaces``: search-path dirs are bound back).
A header that does not match a build's flags is ignored by GCC, which then parses the copy
beside it, the same text as torch's: builds are never wrong, only slower.

Run as a script, it builds into the dir given: ``python tests/torch_pch.py DIR``.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The levels the suite's candidates ask for (``-O0`` is the default's own header).
LEVELS = ("", "-O2", "-O3")
MARKER = "complete"
MIN_FREE_BYTES = 8 << 30  # three headers take ~2.4 GB; leave the suite its room
DISABLE = "CUDAL1_TEST_PCH"  # "0": build nothing, leave CPATH alone


def install() -> str:
    """Build (or reuse) the headers and put their dir first on ``CPATH``; what happened."""
    if os.environ.get(DISABLE) == "0":
        return f"off ({DISABLE}=0)"
    root = Path(tempfile.gettempdir()) / f"cudal1-test-pch-{os.getuid()}"
    if shutil.disk_usage(root.parent).free < MIN_FREE_BYTES:
        return f"off: less than {MIN_FREE_BYTES >> 30} GB free under {root.parent}"
    root.mkdir(mode=0o755, exist_ok=True)
    started = time.monotonic()
    try:
        with open(root / "lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # a second session waits for the first's build
            done = subprocess.run([sys.executable, __file__, str(root)], capture_output=True,
                                  text=True, timeout=900)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"off: {exc}"
    if done.returncode != 0:
        return f"off: the build failed: {(done.stderr or done.stdout).strip()[-400:]}"
    include_dir = done.stdout.strip().splitlines()[-1]
    os.environ["CPATH"] = os.pathsep.join(filter(None, (include_dir,
                                                        os.environ.get("CPATH"))))
    return f"{include_dir} ({time.monotonic() - started:.0f} s)"


def _torch_cflags() -> tuple[str, list[str]]:
    """(compiler, flags) exactly as ``load_inline`` writes them for a CPU build, read from the
    ninja file torch itself writes, less the extension's name."""
    from torch.utils import cpp_extension

    with tempfile.TemporaryDirectory() as tmp:
        ninja = Path(tmp) / "build.ninja"
        # private, but where torch makes its flags; should it go, the header is off
        cpp_extension._write_ninja_file_to_build_library(
            str(ninja), "cudal1_pch_probe", [str(Path(tmp) / "main.cpp")], [], [], [], [],
            [], False, False, False)
        lines = ninja.read_text().splitlines()
    cflags = next(line.split("=", 1)[1] for line in lines if line.startswith("cflags ="))
    flags = [f for f in shlex.split(cflags) if not f.startswith("-DTORCH_EXTENSION_NAME=")]
    return os.environ.get("CXX", "c++"), flags


def _build(root: Path) -> Path:
    """The include dir holding ``torch/extension.h`` and its headers; built once per key."""
    from torch.utils import cpp_extension

    compiler, flags = _torch_cflags()
    version = subprocess.run([compiler, "--version"], capture_output=True, text=True).stdout
    key = hashlib.sha256("\0".join([version, *flags, *LEVELS]).encode()).hexdigest()[:16]
    include_dir = root / key
    if (include_dir / MARKER).exists():
        return include_dir
    shutil.rmtree(include_dir, ignore_errors=True)
    torch_dir = include_dir / "torch"
    pch_dir = torch_dir / "extension.h.gch"
    pch_dir.mkdir(parents=True)
    header = next(Path(p) / "torch" / "extension.h" for p in cpp_extension.include_paths()
                  if (Path(p) / "torch" / "extension.h").is_file())
    shutil.copyfile(header, torch_dir / "extension.h")
    builds = [subprocess.Popen([compiler, *flags, *filter(None, [level]), "-x", "c++-header",
                                str(torch_dir / "extension.h"), "-o",
                                str(pch_dir / f"level{level or '-O0'}.gch")],
                               stderr=subprocess.PIPE, text=True) for level in LEVELS]
    failed = [err for proc in builds if (err := proc.communicate()[1]) and proc.returncode]
    if failed:
        shutil.rmtree(include_dir, ignore_errors=True)
        raise SystemExit(failed[0][-2000:])
    for path in (include_dir, torch_dir, pch_dir, *pch_dir.iterdir()):
        path.chmod(0o755 if path.is_dir() else 0o644)  # a child may run as another user
    (include_dir / MARKER).touch()
    return include_dir


if __name__ == "__main__":
    print(_build(Path(sys.argv[1])))
