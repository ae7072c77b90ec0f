export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader
for spec in "examples/relu.py benchmarks/corpus/candidates/relu_warmup_pick_method.py" "examples/gelu_swish_chain.py benchmarks/corpus/candidates/gelu_swish_triton.py"; do
  for div in 10 30; do
    echo "=== $spec divisor $div"
    timeout 100 python3 benchmarks/window_diag.py $spec cuda $div > $OUT/diag_$(basename ${spec##* } .py)_$div.log 2>&1
    grep -E "^ok|^rejected|^incorrect|memory in use|runner |^reference|^candidate|^window|x[0-9]+ " $OUT/diag_$(basename ${spec##* } .py)_$div.log | cut -c1-330
  done
done
