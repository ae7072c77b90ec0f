#!/usr/bin/env bash
# Would CUDA MPS remove what a per-call release costs a fast kernel (docs/security.md, Known
# limits, "Per-call release costs each call a round trip": two GPU context switches a call,
# ~150 µs each way on an H200)? MPS runs every client's work in one GPU context, so a
# referee's step between two of a runner's calls would switch nothing. Measured on one GPU,
# first without MPS, then under an MPS control daemon this script starts and quits on exit (a
# user-space daemon: no card setting, compute mode or clock is changed):
#   1. switch_cost_diag.py: a runner's call, a referee's step between calls (two processes);
#   2. vmm_fd_diag.py: the arena shared as a file descriptor between two clients (the
#      evaluator's CUDA buffers need it);
#   3. release_diag.py --gpu-60x: the evaluator itself, whose children are sandboxed (do they
#      reach the daemon: its pipe directory must be visible in their mounts, and MPS serves
#      one user at a time, while root-started runners run as nobody).
#   OUT=dir bash benchmarks/mps_check.sh            # on a GPU machine, from the repository root
# About 4 minutes. Prints a table last; logs in $OUT/mps/.
set -uo pipefail
OUT=${OUT:-gpu-out}
M=$OUT/mps
mkdir -p "$M"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
export CUDA_MPS_PIPE_DIRECTORY=${CUDA_MPS_PIPE_DIRECTORY:-/tmp/nvidia-mps}
export CUDA_MPS_LOG_DIRECTORY=${CUDA_MPS_LOG_DIRECTORY:-/tmp/nvidia-mps-log}
log() { echo "[$(date +%T) +${SECONDS}s] $*"; }

measure() {  # $1: a label (no_mps / mps)
  local tag=$1
  log "$tag: switch cost"
  timeout 150 python3 benchmarks/switch_cost_diag.py --calls 300 --sizes 4K,64M --modes host \
    --steps alone,none,tiny,kcopy --json "$M/switch_$tag.json" > "$M/switch_$tag.log" 2>&1
  log "$tag: switch cost ended, exit $?"
  log "$tag: arena as a file descriptor"
  timeout 60 python3 benchmarks/vmm_fd_diag.py > "$M/vmmfd_$tag.log" 2>&1
  log "$tag: arena ended, exit $?"
  log "$tag: the evaluator's 60x rewrite"
  ( sleep 40; nvidia-smi > "$M/apps_$tag.txt" 2>&1 ) &  # its process table: type M+C = MPS
  # a client of another user than the daemon's server waits for that server to exit: 100 s
  timeout 100 python3 benchmarks/release_diag.py --gpu-60x > "$M/release_$tag.log" 2>&1
  log "$tag: 60x ended, exit $?"
  wait
}

measure no_mps
if ! command -v nvidia-cuda-mps-control > /dev/null; then
  log "no nvidia-cuda-mps-control on this machine: MPS not measured"
else
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  trap 'echo quit | nvidia-cuda-mps-control; log "MPS daemon quit"' EXIT
  nvidia-cuda-mps-control -d && log "MPS daemon started ($CUDA_MPS_PIPE_DIRECTORY)"
  measure mps
fi

echo
for tag in no_mps mps; do
  [ -e "$M/switch_$tag.log" ] || continue
  echo "== $tag: a call's cycle with a referee's step between calls (µs)"
  sed -n '/^ size/,$p' "$M/switch_$tag.log"
  echo "== $tag: arena as a file descriptor"
  tail -4 "$M/vmmfd_$tag.log" | cut -c1-200
  echo "== $tag: the 60x rewrite in the evaluator (its processes 40 s in)"
  grep -E "^(ok|incorrect|rejected|runtime_error|compile_error) |^no-op|^side|^reference|^candidate|Error" \
    "$M/release_$tag.log" | tail -7 | cut -c1-200
  grep -E "^\|  +[0-9]+ " "$M/apps_$tag.txt" 2>/dev/null | cut -c1-100 | head -8
done
tail -20 "$CUDA_MPS_LOG_DIRECTORY/control.log" > "$M/mps_control.log" 2>/dev/null || true
tail -20 "$CUDA_MPS_LOG_DIRECTORY/server.log" > "$M/mps_server.log" 2>/dev/null || true
