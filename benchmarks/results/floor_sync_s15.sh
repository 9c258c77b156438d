# Fifteenth session: how much of the gap is waiting for the slower rank? floor-sync is the floor
# plus one-element all-reduces after backward and after the step (no bytes); every row now also
# gives each rank's fwd+bwd+sync median. Lead 0 and 10 ms (sleep calibrated after a warm-up launch).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1 || echo "editable install failed"
nvidia-smi --query-gpu=index,name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
i=0
for L in 0 10 0 10; do
  i=$((i+1))
  (cd benchmarks && timeout 140 torchrun --nproc_per_node 2 bench_overlap.py --systems floor,floor-sync,tz-fused,tz-ce --buckets 1e6,1e8 --steps 30 --lead-ms $L --out $OUT/fsync_${L}ms_${i}_s15.json > $OUT/fsync_${L}ms_${i}_s15.log 2>&1; echo "lead $L ($i) rc $?")
done
for f in $OUT/fsync_*_s15.log; do echo "== $f"; grep -E "^(floor|tz)|Error" $f | cut -c1-120; done
