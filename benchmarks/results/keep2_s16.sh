# Sixteenth session, second look at keep_grads_until_step at 1e6: two more runs, order swapped,
# 60 steps each; then the profiler (rank 0, host 10 ms ahead): where backward's delay went.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1 || echo "editable install failed"
cd benchmarks
i=3
for systems in floor,floor-sync,tz-ce-keep,tz-ce floor,tz-ce,tz-ce-keep,floor-sync; do
  i=$((i+1))
  timeout 120 torchrun --nproc_per_node 2 bench_overlap.py --systems $systems --buckets 1e6 --steps 60 --out $OUT/keep_${i}_s16.json > $OUT/keep_${i}_s16.log 2>&1; echo "run $i rc $?"
done
timeout 120 torchrun --nproc_per_node 2 profile_gpu.py --systems floor,tz-ce,tz-ce-keep --bucket 1e6 --lead-ms 10 > $OUT/profile_keep_s16.log 2>&1; echo "profile rc $?"
for f in $OUT/keep_*_s16.log; do echo "== $f"; grep -E "^(floor|tz)|Error" $f | cut -c1-130; done
grep -A5 "^bucket" $OUT/profile_keep_s16.log
