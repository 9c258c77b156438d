# Sixteenth session: keep_grads_until_step (copy-engine transport): a rank's slice that lies inside
# one gradient is summed in place in the step instead of being copied out beside backward.
# The copy-engine GPU tests, then tz-ce against tz-ce-keep, order swapped between runs.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1 || echo "editable install failed"
timeout 200 python3 -m pytest -q -s tests/test_copy_engine_gpu.py tests/test_errors.py -p no:cacheprovider > $OUT/pytest_keep_s16.log 2>&1; echo "pytest rc $?"
cd benchmarks
i=0
for systems in floor,floor-sync,tz-ce,tz-ce-keep floor,tz-ce-keep,tz-ce,floor-sync floor,floor-sync,tz-ce,tz-ce-keep; do
  i=$((i+1))
  timeout 100 torchrun --nproc_per_node 2 bench_overlap.py --systems $systems --buckets 1e6 --steps 30 --out $OUT/keep_${i}_s16.json > $OUT/keep_${i}_s16.log 2>&1; echo "run $i rc $?"
done
timeout 120 torchrun --nproc_per_node 2 bench_overlap.py --systems floor,tz-ce,tz-ce-keep --buckets 25e6,1e8 --steps 30 > $OUT/keep_big_s16.log 2>&1; echo "big rc $?"
grep -E "passed|failed" $OUT/pytest_keep_s16.log | tail -2; grep -E "^(FAILED|ERROR)|Error" $OUT/pytest_keep_s16.log | head -5
grep -E "keep=True step 0" $OUT/pytest_keep_s16.log | head -4
for f in $OUT/keep_*_s16.log; do echo "== $f"; grep -E "^(floor|tz)|Error" $f | cut -c1-130; done
