#!/usr/bin/env bash
# Every GPU measurement of the final code on one host of N GPUs, within one clock (CALL_S):
#   1. scaling over 1, 2, 4 … GPUs (benchmarks/scaling.py), one width at a time, alone on the
#      host (nothing else runs beside a width's timing);
#   2. the corpus's builds, all at once on the CPU cores, before any of its timing;
#   3. a queue of jobs spread over every GPU, one job at a time per GPU, the longest first:
#      the shared-GPU run (issue 24), the corpus beside the independent harness in shards,
#      the exploit suite in shards, where an evaluation's time goes, where a window's goes.
# A job that no longer fits the clock is not started; the log names it. Run it detached, so
# it outlasts the 10-minute calls of a lent machine (each later call waits and brings back
# $OUT as it stands):
#   SCRIPT=benchmarks/gpu_host.sh TOTAL_S=1450 bash benchmarks/gpu_detached.sh start
#   bash benchmarks/gpu_detached.sh wait
# Settings: PROBLEMS (scaling's corpus problems, default 10), SCALING_S (its share of the
# clock, default 660), WIDTHS (default 1 2 4 8, those the host has; empty: no scaling),
# CORPUS_SHARDS and EXPLOIT_SHARDS (default: the GPU count; 0: no such jobs), SHARED
# (shared_gpu.py's options; empty: no shared-GPU job), DIAG (which diagnostic jobs, of
# "memdiag phases window" (the default), "phases_corpus" (PHASES_PAIRS), "noise", "threadnoise", "checkcost", "mps", "forge", "vmmfd" and
# "waitvalue"; empty: none),
# CORPUS_OPTS (compare_gpu.py options added to every corpus job, e.g. --only NAME...),
# EXPLOITS_FIRST (non-empty: the exploit shards first, before the shared-GPU job and the corpus), SCALING_LAST (non-empty:
# scaling after the queue, so a cut clock cuts it rather than the queue), TESTS_FIRST (non-empty:
# the tests job first of all), EXPLOIT_CASES (names: one
# exploit job of those cases instead of the shards), TESTS (pytest options of a last job,
# `pytest -m gpu`, which sees every GPU, its own first; a -k expression goes in TESTS_K, which is
# not split into words: `TESTS="-k a or b"` runs pytest on files named `or` and `b`).
# Measured on 4x H200 (third session of 2026-11-27): width 1 of 10 problems x 2 candidates
# took 471 s, the corpus's 47 pairs 196-369 s a shard of 4, the shared-GPU job 441 s, an
# exploit shard of 11 cases 130-210 s: a width 1 and the queue do not fit one 25-minute run.
set -uo pipefail
OUT=${OUT:-gpu-out}
CALL_S=${CALL_S:-585}
mkdir -p "$OUT/q"
OUT=$(cd "$OUT" && pwd)
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
left() { echo $(( CALL_S - SECONDS - ${1:-0} )); }
log() { echo "[$(date +%T) +${SECONDS}s] $*"; }

OUT=$OUT CALL_S=120 bash benchmarks/gpu_session.sh  # wheels installed once; env.txt
export SKIP_INSTALL=1
gpus=$(nvidia-smi -L | wc -l)
widths=()
for w in ${WIDTHS-1 2 4 8}; do [ "$w" -le "$gpus" ] && widths+=("$w"); done
log "$gpus GPUs, $(nproc) cores; scaling widths ${widths[*]}"

# -- 1. scaling, alone on the host (SCALING_LAST: after the queue, still alone) -------
S=$OUT/scaling
mkdir -p "$S"
scaling() {
  local scaling_end=$(( SECONDS + ${SCALING_S:-660} )) budget
  for w in "${widths[@]}"; do
    budget=$(( scaling_end - SECONDS ))
    if [ "$budget" -lt 60 ]; then log "scaling: no time left for width $w"; break; fi
    log "scaling: width $w, at most $budget s"
    timeout "$budget" python3 benchmarks/scaling.py --widths "$w" --problems "${PROBLEMS:-10}" \
      --candidates 2 --timing-budget 2 --build-dir /tmp/scaling-builds \
      --results "$S/scaling.json" --out "$S" > "$S/width$w.log" 2>&1
    log "scaling: width $w ended, exit $?"
    tail -12 "$S/width$w.log"
  done
}
if [ -z "${SCALING_LAST:-}" ]; then scaling; fi

# -- 2. the corpus's builds, before any of its timing -------------------------------------
B=/tmp/corpus-builds
cs=${CORPUS_SHARDS:-$gpus}
es=${EXPLOIT_SHARDS:-$gpus}
if [ "$cs" -gt 0 ] && [ -z "${CORPUS_OPTS:-}" ]; then  # a subset's jobs build what it needs
  log "corpus builds"
  timeout "$(left 240)" python3 benchmarks/compare_gpu.py benchmarks/corpus/manifest.toml \
    --builds-only --build-root "$B" --workers $(( $(nproc) - 2 )) --out "$OUT/q/builds.json" \
    > "$OUT/q/builds.log" 2>&1
  log "corpus builds ended, exit $?: $(tail -1 "$OUT/q/builds.log")"
fi

# -- 3. the queue -------------------------------------------------------------------------
tasks=() shared_jobs=()
[ -n "${SHARED-x}" ] && shared_jobs+=("shared ${SHARED:---problems 3 --only conv3x3_relu conv_bn_relu_eval gemm_bias_silu --phases idle,busy}")
corpus_jobs=() exploit_jobs=()
for k in $(seq 1 "$cs"); do
  corpus_jobs+=("corpus --build-root $B --builds-first --shard $k/$cs ${CORPUS_OPTS:-}")
done
if [ -n "${EXPLOIT_CASES:-}" ]; then exploit_jobs+=("exploits $EXPLOIT_CASES")
else for k in $(seq 1 "$es"); do exploit_jobs+=("exploit-shard $k/$es"); done; fi
if [ -n "${EXPLOITS_FIRST:-}" ]; then  # the exploit shards before everything else
  tasks+=("${exploit_jobs[@]}" "${shared_jobs[@]}" "${corpus_jobs[@]}")
else tasks+=("${shared_jobs[@]}" "${corpus_jobs[@]}" "${exploit_jobs[@]}"); fi
if [ -n "${TESTS:-}" ]; then  # TESTS_FIRST: before everything (a quick check of the code)
  if [ -n "${TESTS_FIRST:-}" ]; then tasks=("tests $TESTS" "${tasks[@]}"); else tasks+=("tests $TESTS"); fi
fi
for d in ${DIAG-memdiag phases window}; do
  case "$d" in
    memdiag) tasks+=("memdiag") ;;
    forge) tasks+=("forge") ;;
    threadnoise) tasks+=("threadnoise ${THREADNOISE_OPTS:---repeat 1}") ;;
    vmmfd) tasks+=("vmmfd") ;;
    checkcost) tasks+=("checkcost") ;;
    mps) tasks+=("mps") ;;
    waitvalue) tasks+=("waitvalue") ;;
    noise) tasks+=("noise examples/relu.py benchmarks/corpus/candidates/relu_warmup_pick_method.py --repeat 3") ;;
    phases) tasks+=("phases --trials 5 --budget 2 --repeat 3 --gap 10") ;;
    phases_corpus)  # cached re-evaluations of corpus pairs at the app's defaults
      for pair in ${PHASES_PAIRS:-relu_triton logsumexp_builtin gemm_silu_addmm_inplace}; do
        tasks+=("phases --pair $pair --trials 5 --budget 10 --repeat 2 --gap 10")
      done ;;
    window)
      tasks+=("window examples/diag_matmul.py benchmarks/corpus/candidates/diag_broadcast.py")
      tasks+=("window benchmarks/corpus/problems/tiny_scale_shift.py benchmarks/corpus/candidates/tiny_scale_shift_addcmul.py") ;;
  esac
done
Q=$OUT/q/next
echo 0 > "$Q"
take() { flock "$Q.lock" bash -c 'n=$(cat "$0"); echo $((n + 1)) > "$0"; echo "$n"' "$Q"; }
worker() {
  local gpu=$1 n
  while true; do
    n=$(take)
    [ "$n" -ge "${#tasks[@]}" ] && return
    if [ "$(left 60)" -lt 60 ]; then log "gpu $gpu: no time left for: ${tasks[$n]}"; continue; fi
    log "gpu $gpu: job $n: ${tasks[$n]}"
    mkdir -p "$OUT/q/j$n"
    local visible=$gpu  # the tests see every GPU, theirs first (the two-GPU tests)
    [ "${tasks[$n]%% *}" = tests ] && visible=$(seq 0 $(( gpus - 1 )) | grep -vx "$gpu" \
      | paste -sd, | sed "s/^/$gpu,/; s/,$//")
    # shellcheck disable=SC2086  # a job's words are its step and options
    CUDA_VISIBLE_DEVICES=$visible OUT=$OUT/q/j$n CALL_S=$(left 15) RESERVE_S=15 \
      bash benchmarks/gpu_session.sh ${tasks[$n]} > "$OUT/q/j$n/session.log" 2>&1
    log "gpu $gpu: job $n ended, exit $?"
  done
}
for g in $(seq 0 $(( gpus - 1 ))); do worker "$g" & done
wait
log "all jobs done"
for f in "$OUT"/q/j*/session.log; do echo "== $f"; tail -8 "$f" | cut -c1-240; done
if [ -n "${SCALING_LAST:-}" ]; then scaling; fi
