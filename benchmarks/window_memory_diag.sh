#!/usr/bin/env bash
# How a window's memory share moves the per-call times of memory-bound pairs, on one GPU:
# window_diag.py (where a window's time goes, the runners' own per-call account, the device's
# peak memory) for each pair at each divisor (a window's sets take 1/DIVISOR of the free
# device memory). Run on 30 Nov (one H200): the misses were the hand-off, not memory.
#   OUT=gpu-out DIVISORS="10 30" bash benchmarks/window_memory_diag.sh
# PAIRS: "PROBLEM:CANDIDATE ..." (default: relu and gelu_swish, 1 GiB and 512 MiB a set).
set -uo pipefail
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
default="examples/relu.py:benchmarks/corpus/candidates/relu_warmup_pick_method.py"
default+=" examples/gelu_swish_chain.py:benchmarks/corpus/candidates/gelu_swish_triton.py"
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader
for pair in ${PAIRS:-$default}; do
  problem=${pair%%:*} candidate=${pair##*:}
  for div in ${DIVISORS:-10 30}; do
    log=$OUT/diag_$(basename "$candidate" .py)_$div.log
    echo "=== $problem $candidate, a window's sets 1/$div of free memory"
    timeout "${EACH_S:-100}" python3 benchmarks/window_diag.py "$problem" "$candidate" cuda "$div" \
      > "$log" 2>&1
    grep -E "^ok|^rejected|^incorrect|memory in use|^reference|^candidate|^window|x[0-9]+ " "$log" \
      | cut -c1-330
  done
done
