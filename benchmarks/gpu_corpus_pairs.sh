#!/usr/bin/env bash
# Named corpus pairs beside the independent harness, one list per GPU at once, within one
# call of a lent machine (the whole corpus takes ~25 min on two GPUs: gpu_host.sh). Each
# list's native builds run first, on half the cores, then its timing:
#   PAIRS_0="relu_triton gelu_swish_triton" PAIRS_1="gelu_swish_cuda_bench" CALL_S=330 \
#     bash benchmarks/gpu_corpus_pairs.sh
# Results: $OUT/g<N>/agreement_1.json (+ .log); the table after:
#   python benchmarks/agreement_table.py OUT/g*/agreement_1.json --notes benchmarks/corpus/agreement_notes.toml
set -uo pipefail
OUT=${OUT:-gpu-out}
CALL_S=${CALL_S:-330}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
OUT=$OUT CALL_S=60 bash benchmarks/gpu_session.sh  # wheels installed once; env.txt
left=$(( CALL_S - SECONDS ))
workers=$(( $(nproc) / 2 - 1 ))
n=0
for var in PAIRS_0 PAIRS_1 PAIRS_2 PAIRS_3 PAIRS_4 PAIRS_5 PAIRS_6 PAIRS_7; do
  pairs=${!var:-}
  [ -z "$pairs" ] && continue
  # shellcheck disable=SC2086  # a list of names
  SKIP_INSTALL=1 CUDA_VISIBLE_DEVICES=$n OUT=$OUT/g$n CALL_S=$left RESERVE_S=10 \
    bash benchmarks/gpu_session.sh corpus --builds-first --build-root "/tmp/pairs-builds-$n" \
    --workers "$workers" --only $pairs > "$OUT/g$n.log" 2>&1 &
  n=$(( n + 1 ))
done
wait
for f in "$OUT"/g*.log; do echo "== $f"; grep -E "^\[|pairs in" "$f" | cut -c1-160; done
python3 benchmarks/agreement_table.py "$OUT"/g*/agreement_1.json \
  --notes benchmarks/corpus/agreement_notes.toml 2>&1 | head -4
