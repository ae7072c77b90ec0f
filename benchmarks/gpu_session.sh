#!/usr/bin/env bash
# Everything this project proves on a lent GPU, in two parts that each fit one 10-minute call.
#   bash benchmarks/gpu_session.sh a            # the exploit suite, then the corpus from its start
#   bash benchmarks/gpu_session.sh b NAMES...   # the rest of the corpus (NAMES: the pairs part a
#                                               # measured), then compile and throughput
#   bash benchmarks/gpu_session.sh tests        # the gpu-marked tests
# Run from the repository root on the GPU host. Wheels for the app's other dependencies (the
# static gate needs tree-sitter) may be carried in .whl/: they are installed with pip into the
# host's own interpreter, as a user would. Results land in $OUT (default ./gpu-out). Each part
# watches the clock ($SECONDS) and stops starting work in time to print its tables.
set -uo pipefail
OUT=${OUT:-gpu-out}
CALL_S=${CALL_S:-585}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --find-links .whl textual openai tree-sitter \
    tree-sitter-python tree-sitter-cpp tree-sitter-c tree-sitter-cuda gitpython platformdirs \
    pytest pytest-timeout pytest-asyncio 2>&1 | grep -v -i warning | tail -3
fi
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python3 -c 'import torch, triton, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__)'
  nvcc --version | tail -1; ninja --version; nproc; git rev-parse --short HEAD 2>/dev/null; } 2>&1 | tee "$OUT/env.txt"
python3 -m cudal1_tui doctor 2>&1 | grep -i -E "sandbox|gpu|cuda" >> "$OUT/env.txt"

left() { echo $(( CALL_S - SECONDS - ${1:-0} )); }
corpus() {  # corpus ARGS...: the corpus until the call's clock says stop
  local budget; budget=$(left 20)
  timeout "$budget" python3 benchmarks/compare_gpu.py benchmarks/corpus/manifest.toml \
    --timeout 90 --deadline-s $(( budget - 75 )) "$@" 2>&1 | tee "$OUT/agreement.log" \
    | grep -E "^\[|deadline|measured|pairs in" | cut -c1-220
}
case "${1:-a}" in
  a)
    timeout 330 python3 tests/exploits/suite.py cuda --deadline-s 270 \
      --json "$OUT/exploits.json" > "$OUT/exploits.log" 2>&1
    grep -E "^\[|deadline|as expected|not as expected" "$OUT/exploits.log" | tail -50
    corpus --out "$OUT/agreement_a.json"
    ;;
  b)
    shift
    CALL_S=$(( CALL_S - 170 )) corpus --out "$OUT/agreement_b.json" --skip-names "$@"
    timeout "$(left 5)" python3 benchmarks/evaluator_gpu.py --only compile throughput \
      --out "$OUT" 2>&1 | tee "$OUT/evaluator_gpu.log" | tail -25
    ;;
  tests)
    timeout "$(left 10)" python3 -m pytest -q -p no:cacheprovider -m gpu tests/ 2>&1 \
      | tee "$OUT/gpu_tests.log" | tail -15
    ;;
  *) echo "usage: gpu_session.sh a | b MEASURED_PAIR_NAMES... | tests"; exit 2 ;;
esac
