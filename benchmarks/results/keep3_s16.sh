# Sixteenth session, keep_grads_until_step on a third machine: tz-ce against tz-ce-keep at 1e6
# (60 steps, order swapped) and at 25e6 (30 steps, order swapped).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1 || echo "editable install failed"
nvidia-smi --query-gpu=index,name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
cd benchmarks
i=0
for spec in "floor,floor-sync,tz-ce,tz-ce-keep 1e6 60" "floor,tz-ce-keep,tz-ce,floor-sync 1e6 60" "floor,tz-ce,tz-ce-keep 25e6 30" "floor,tz-ce-keep,tz-ce 25e6 30"; do
  set -- $spec; i=$((i+1))
  timeout 120 torchrun --nproc_per_node 2 bench_overlap.py --systems $1 --buckets $2 --steps $3 --out $OUT/keep3_${i}_s16.json > $OUT/keep3_${i}_s16.log 2>&1; echo "run $i rc $?"
done
for f in $OUT/keep3_*_s16.log; do echo "== $f"; grep -E "^(floor|tz)|Error" $f | cut -c1-130; done
