#!/usr/bin/env bash
# An honest copy evaluated by a parent started without root, as a user's own run is: the
# evaluator as uid 65534 (nobody), its candidate children in user namespaces of their own.
# Root starts (CI, the lent GPU machines) never take this path. Run as root, from the
# repository root:   bash benchmarks/nonroot_check.sh [cpu|cuda]
# nobody may not enter root's dirs: in a private mount namespace it is shown the repository,
# the virtual environment (if any) and, where it lives under /root (pyenv), the interpreter's
# prefix; nothing else of /root.
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "run as root: it drops to uid 65534 itself" >&2; exit 2; }
DEVICE=${1:-cpu}
REPO=$(pwd)
read -r VENV BASE <<<"$(python3 -c 'import sys; print(sys.prefix, sys.base_prefix)')"
SHOW=$(mktemp -d /tmp/nonroot-show.XXXX)
chmod 755 "$SHOW"
mkdir -p "$SHOW/repo" "$SHOW/home" "$SHOW/root"
chown 65534:65534 "$SHOW/home"
trap 'rm -rf "$SHOW"' EXIT
PY=$(python3 -c 'import sys; print(sys.executable)')
if [ "$VENV" != "$BASE" ]; then mkdir -p "$SHOW/venv"; PY="$SHOW/venv/bin/$(basename "$PY")"; fi
cat > "$SHOW/home/check.py" <<PYEOF
import os, sys, tempfile, time
sys.path.insert(0, "$SHOW/repo/tests/evaluator")
from dataclasses import replace
from pathlib import Path
from evaluator_cases import DIAG_PROBLEM, job
from cudal1_evaluator.launch import evaluate
t = time.monotonic()
candidate = DIAG_PROBLEM.replace("class Model(", "class ModelNew(")
result = evaluate(replace(job(DIAG_PROBLEM, candidate, Path(tempfile.mkdtemp()) / "c"),
                          device="$DEVICE", timing_budget_s=0.5))
print("uid", os.getuid(), "status", result.status, "speedup", result.speedup,
      f"({time.monotonic() - t:.0f} s)")
for flag in result.flags:
    print("  ", flag.code, flag.severity, flag.reason[:150])
sys.exit(0 if result.status == "ok" else 1)
PYEOF
export REPO VENV BASE SHOW PY
unshare -m --propagation private bash -c '
  set -e
  mount --bind "$REPO" "$SHOW/repo"
  [ -d "$SHOW/venv" ] && mount --bind "$VENV" "$SHOW/venv"
  if [ "${BASE#/root/}" != "$BASE" ]; then
    mkdir -p "$SHOW/root/${BASE#/root/}" && mount --bind "$BASE" "$SHOW/root/${BASE#/root/}"
    mount --rbind "$SHOW/root" /root
  fi
  exec setpriv --reuid 65534 --regid 65534 --clear-groups env HOME="$SHOW/home" \
    PYTHONPATH="$SHOW/repo" PATH="$(dirname "$PY"):/usr/bin:/bin" "$PY" "$SHOW/home/check.py"'
