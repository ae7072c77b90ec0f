#!/usr/bin/env bash
# Everything this project proves on a lent GPU, in two parts that each fit one 10-minute call.
#   bash benchmarks/gpu_session.sh check   # GPU tests, the exploit suite, compile/repeat/throughput
#   bash benchmarks/gpu_session.sh corpus  # the real-kernel corpus beside the independent harness
# Run from the repository root on the GPU host. Wheels for the app's other dependencies (the
# static gate needs tree-sitter) may be carried in .whl/: they are installed with pip into the
# host's own interpreter, as a user would. Results land in $OUT (default ./gpu-out).
set -uo pipefail
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --find-links .whl textual openai tree-sitter \
    tree-sitter-python tree-sitter-cpp tree-sitter-c tree-sitter-cuda gitpython platformdirs \
    pytest pytest-timeout pytest-asyncio 2>&1 | grep -v -i warning | tail -3
fi
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python3 -c 'import torch, triton, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__)'
  nvcc --version | tail -1; ninja --version; nproc; } 2>&1 | tee "$OUT/env.txt"
python3 -m cudal1_tui doctor 2>&1 | grep -i -E "sandbox|gpu|cuda" | tee -a "$OUT/env.txt"
case "${1:-check}" in
  check)
    timeout 300 python3 -m pytest -q -x -p no:cacheprovider -m gpu tests/ 2>&1 | tee "$OUT/gpu_tests.log" | tail -15
    timeout 240 python3 tests/exploits/suite.py cuda --json "$OUT/exploits.json" 2>&1 | tee "$OUT/exploits.log" | tail -45
    timeout 200 python3 benchmarks/evaluator_gpu.py --only compile repeat throughput --out "$OUT" 2>&1 | tee "$OUT/evaluator_gpu.log" | tail -40
    ;;
  corpus)
    shift
    timeout 560 python3 benchmarks/compare_gpu.py benchmarks/corpus/manifest.toml --out "$OUT/agreement.json" "$@" 2>&1 | tee "$OUT/agreement.log" | tail -70
    ;;
  *) echo "usage: gpu_session.sh check|corpus [compare_gpu options]"; exit 2 ;;
esac
