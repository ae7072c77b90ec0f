#!/usr/bin/env bash
# Everything this project proves on a lent GPU, as steps that share one 10-minute call:
#   bash benchmarks/gpu_session.sh exploits [CASE...] + corpus [compare_gpu options] + throughput
#   bash benchmarks/gpu_session.sh tests                      # the gpu-marked tests
# Steps (joined by "+", run in order, each watching the call's clock, $SECONDS against CALL_S):
#   exploits [CASE...]  the exploit suite on CUDA (honest cases first), all cases or the named;
#                       EXPLOITS_S=N starts no case after N seconds (time left for the steps after it)
#   corpus [OPTS...]    the real-kernel corpus beside the independent harness; a run cut by its
#                       deadline prints the names it measured, for --skip-names in the next call
#   throughput          a cold build, cached re-evaluations, candidates per minute
#   latency [OPTS...]   does our clock charge candidates their host launch cost? (do_bench vs
#                       Clock with and without its head start, a 256 MB flush, host time)
#   tests [PYTEST...]   pytest -m gpu (e.g. --ignore=tests/exploits where the exploits step ran;
#                       TESTS_K="a or b" selects by a -k expression)
#   exploit-shard K/N   every Nth exploit case from the Kth (one process per GPU, below)
#   watch               what the evaluator's watch of other GPU work sees (gpu_watch_diag.py)
#   scaling [OPTS...]   benchmarks/scaling.py (candidates a minute over 1, 2, 4 … GPUs)
#   shared [OPTS...]    benchmarks/shared_gpu.py (a generating model server on the timing GPU)
#   phases [OPTS...]    where one evaluation's time goes (evaluator_phases.py: first and cached)
#   window PROBLEM CAND where a trusted window's time goes, per step (window_diag.py, CUDA)
#   noise PROBLEM CAND [OPTS...]  window-to-window noise with and without warm children
#                       started beside the rounds, or a CUDA process starting beside them
#   threadnoise [OPTS...]  a busy app thread beside the clock, in the app's process and in a
#                       lane process (app_thread_noise.py)
#   checkcost [OPTS...] what the referee's check of one output costs, by part (check_cost_diag.py)
#   mps                 does CUDA MPS remove the per-call release's context switches? (mps_check.sh)
#   forge               can a driver IPC handle be forged from a process's own handles?
#                       (ipc_forge_diag.py: security.md's "Forged IPC handles", tried)
#   vmmfd               can an arena be shared as a file descriptor (VMM), across IPC namespaces?
#                       (vmm_fd_diag.py: the root fix of security.md's "Forged IPC handles")
#   waitvalue           can a stopped process's GPU work be released by another's write?
#                       (waitvalue_diag.py: security.md's "GPU work waiting", tried)
#   handover            the runner's per-call bookkeeping against a call's device time
#                       (handover_cost.py: is a fast kernel's loop bound by our hand-over?)
#   diag                TorchScript in our worker vs a plain process; reduce-overhead outputs held;
#                       conv_bn_fold_eval's wall time outside the timed calls, three times
# Run from the repository root on the GPU host. Wheels for the app's other dependencies (the
# static gate needs tree-sitter) may be carried in .whl/: they are installed with pip into the
# host's own interpreter, as a user would. Results land in $OUT (default ./gpu-out).
# CALL_S counts from this script's own start: a second invocation in the same device call
# (after an install, say) must get a smaller CALL_S, or the call's limit kills it before its
# results are packed; pack $OUT from a trap (trap 'tar czf ...' EXIT) or after a `timeout`.
# Steps on several GPUs at once: install once, then one process per GPU, e.g.
#   bash benchmarks/gpu_session.sh watch
#   for i in 0 1 2; do SKIP_INSTALL=1 CUDA_VISIBLE_DEVICES=$i OUT=$OUT/g$i \
#     bash benchmarks/gpu_session.sh corpus --shard $((i + 1))/3 & done; wait
set -uo pipefail
OUT=${OUT:-gpu-out}
CALL_S=${CALL_S:-585}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
if [ -d .whl ] && [ -z "${SKIP_INSTALL:-}" ]; then
  python3 -m pip install -q --no-index --find-links .whl textual openai tree-sitter \
    tree-sitter-python tree-sitter-cpp tree-sitter-c tree-sitter-cuda gitpython platformdirs \
    pytest pytest-timeout pytest-asyncio 2>&1 | grep -v -i warning | tail -3
fi
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python3 -c 'import torch, triton, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__)'
  nvcc --version | tail -1; ninja --version; nproc; } 2>&1 | tee "$OUT/env.txt"
python3 -m cudal1_tui doctor 2>&1 | grep -i -E "sandbox|gpu|cuda" >> "$OUT/env.txt"

left() { echo $(( CALL_S - SECONDS - ${1:-0} )); }
step=0
run_step() {
  step=$((step + 1))
  local name=$1; shift
  case "$name" in
    exploits)
      local only=(); [ $# -gt 0 ] && only=(--only "$@")
      local cap; cap=$(left 60); [ -n "${EXPLOITS_S:-}" ] && [ "$EXPLOITS_S" -lt "$cap" ] \
        && cap=$EXPLOITS_S  # EXPLOITS_S: start no case after that many seconds of this step
      timeout "$(left 10)" python3 tests/exploits/suite.py cuda --deadline-s "$cap" \
        --show-log --json "$OUT/exploits_$step.json" "${only[@]}" > "$OUT/exploits_$step.log" 2>&1
      grep -E "^\[|deadline|as expected" "$OUT/exploits_$step.log" | tail -45 ;;
    exploit-shard)
      timeout "$(left 10)" python3 tests/exploits/suite.py cuda --deadline-s "$(left 60)" \
        --show-log --json "$OUT/exploits_$step.json" --shard "$1" > "$OUT/exploits_$step.log" 2>&1
      grep -E "^\[|deadline|as expected" "$OUT/exploits_$step.log" | tail -45 ;;
    watch)
      timeout "$(left 5)" python3 benchmarks/gpu_watch_diag.py 2>&1 | tee "$OUT/gpu_watch.log" ;;
    scaling)
      timeout "$(left 5)" python3 benchmarks/scaling.py --out "$OUT" "$@" 2>&1 \
        | tee "$OUT/scaling.log" | tail -20 ;;
    shared)
      timeout "$(left 5)" python3 benchmarks/shared_gpu.py --out "$OUT" "$@" 2>&1 \
        | tee "$OUT/shared_gpu.log" | tail -30 ;;
    corpus)
      local budget; budget=$(left "${RESERVE_S:-20}")
      timeout "$budget" python3 benchmarks/compare_gpu.py benchmarks/corpus/manifest.toml \
        --timeout 90 --deadline-s $(( budget - 60 )) --out "$OUT/agreement_$step.json" "$@" 2>&1 \
        | tee "$OUT/agreement_$step.log" | grep -E "^\[|deadline|measured|pairs in" | cut -c1-240 ;;
    throughput)
      timeout "$(left 5)" python3 benchmarks/evaluator_gpu.py --only compile throughput \
        --out "$OUT" 2>&1 | tee "$OUT/evaluator_gpu.log" | tail -25 ;;
    latency)
      timeout "$(left 5)" python3 benchmarks/launch_latency_gpu.py "$@" 2>&1 \
        | tee "$OUT/launch_latency.md" | tail -20 ;;
    phases)
      timeout "$(left 5)" python3 benchmarks/evaluator_phases.py "$@" 2>&1 \
        | tee -a "$OUT/phases.log" | cut -c1-200 ;;
    window)
      timeout "$(left 5)" python3 benchmarks/window_diag.py "$1" "$2" cuda 2>&1 \
        | tee -a "$OUT/window_diag.log" | cut -c1-200 ;;
    noise)
      timeout "$(left 5)" python3 benchmarks/noise_diag.py "$@" 2>&1 \
        | tee -a "$OUT/noise_diag.log" | cut -c1-200 ;;
    checkcost)
      timeout "$(left 5)" python3 benchmarks/check_cost_diag.py "$@" 2>&1 \
        | tee -a "$OUT/check_cost.log" | cut -c1-200 ;;
    mps)
      OUT=$OUT timeout "$(left 5)" bash benchmarks/mps_check.sh 2>&1 | tail -60 | cut -c1-200 ;;
    threadnoise)
      timeout "$(left 5)" python3 benchmarks/app_thread_noise.py "$@" 2>&1 \
        | tee -a "$OUT/app_thread_noise.log" | cut -c1-200 ;;
    forge)
      timeout "$(left 5)" python3 benchmarks/ipc_forge_diag.py "$@" 2>&1 \
        | tee -a "$OUT/ipc_forge_diag.log" | cut -c1-200 ;;
    vmmfd)
      timeout "$(left 5)" python3 benchmarks/vmm_fd_diag.py "$@" 2>&1 \
        | tee -a "$OUT/vmm_fd_diag.log" | cut -c1-200 ;;
    waitvalue)
      timeout "$(left 5)" python3 benchmarks/waitvalue_diag.py "$@" 2>&1 \
        | tee -a "$OUT/waitvalue_diag.log" | cut -c1-200 ;;
    handover)
      timeout "$(left 5)" python3 benchmarks/handover_cost.py 2>&1 \
        | tee -a "$OUT/handover_cost.log" | cut -c1-200 ;;
    memdiag)
      timeout "$(left 5)" python3 benchmarks/memory_bound_diag.py "$@" 2>&1 \
        | tee -a "$OUT/memory_bound_diag.log" | cut -c1-200 ;;
    diag)
      timeout "$(left 5)" python3 benchmarks/gpu_diag.py 2>&1 | tee "$OUT/gpu_diag.log" | cut -c1-400 ;;
    tests)  # TESTS_K: a -k expression (spaces and all: it is not split into words);
      # TESTS_PATHS: which files, in that order (default tests/)
      local select=(); [ -n "${TESTS_K:-}" ] && select=(-k "$TESTS_K")
      # -v and failures as they happen: a suite its time limit cuts keeps what it saw; no
      # precompiled header (its ~1 min build would buy little among nvcc builds)
      CUDAL1_TEST_PCH=0 CUDAL1_FAILURES_NOW=1 timeout "$(left 10)" python3 -m pytest -v -p no:cacheprovider \
        -m gpu ${TESTS_PATHS:-tests/} "$@" "${select[@]}" 2>&1 | tee "$OUT/gpu_tests.log" \
        | grep -E "PASSED|FAILED|SKIPPED|ERROR|passed|failed" | cut -c1-200 | tail -40 ;;
    *) echo "unknown step $name: exploits | exploit-shard | corpus | throughput | latency |" \
         "tests | diag | checkcost | mps | threadnoise | forge | handover | memdiag | noise | vmmfd | waitvalue | watch | scaling | shared | phases | window"; return 2 ;;
  esac
}
args=()
for a in "$@" +; do
  if [ "$a" = "+" ]; then
    [ ${#args[@]} -gt 0 ] && run_step "${args[@]}"
    args=()
  else
    args+=("$a")
  fi
done
