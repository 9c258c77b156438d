# Twenty-first session: the twentieth session's code (gloo fix, mixed-dtype equivalence cases) on 2 x H200:
# every GPU test file, then floor-shard-sync beside tritonzero back to back and with a 40 ms rest per step.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1 || echo "editable install failed"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'nccl', torch.cuda.nccl.version())"
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,power.draw,power.limit,temperature.gpu --format=csv,noheader
timeout 300 python3 -m pytest -q -rfEX tests/ -p no:cacheprovider > $OUT/pytest_gpu_s21.log 2>&1; echo "pytest rc $?"
grep -E "passed|failed" $OUT/pytest_gpu_s21.log | tail -2; grep -E "^(FAILED|ERROR|XPASS)" $OUT/pytest_gpu_s21.log | head
F='grep -v "^W\|Warning\|warn\|return func\|device_id\|^\[rank"'
for rest in 0 40; do
  timeout 120 torchrun --nproc_per_node 2 benchmarks/bench_overlap.py --systems floor,floor-sync,floor-shard-sync,tz-ce-keep,tz-ce,tz-fused \
    --buckets 1e6,25e6,1e8 --steps 20 --rest-ms $rest --out $OUT/shard_floor_rest${rest}_s21.json 2>&1 | eval $F > $OUT/shard_floor_rest${rest}_s21.log
  echo "rest $rest"; grep -E "^(floor|tz|system)|Error" $OUT/shard_floor_rest${rest}_s21.log | cut -c1-140
done
