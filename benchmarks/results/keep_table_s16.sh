# Sixteenth session: keep_grads_until_step in the 1e6 table beside the baselines (two runs, the
# order reversed), then tz-ce against tz-ce-keep at 25e6 (order swapped from keep_big_s16).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > /dev/null 2>&1 || echo "site install failed"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1 || echo "editable install failed"
cd benchmarks
i=0
for systems in floor,floor-sync,tz-ce-keep,tz-ce,tz-fused,deepspeed,ddp floor,ddp,deepspeed,tz-fused,tz-ce,tz-ce-keep,floor-sync; do
  i=$((i+1))
  PYTHONPATH=/tmp/site timeout 200 torchrun --nproc_per_node 2 bench_overlap.py --systems $systems --buckets 1e6 --steps 30 --out $OUT/keep_table${i}_s16.json > $OUT/keep_table${i}_s16.log 2>&1; echo "table $i rc $?"
done
timeout 120 torchrun --nproc_per_node 2 bench_overlap.py --systems floor,tz-ce-keep,tz-ce --buckets 25e6 --steps 30 > $OUT/keep_25e6_s16.log 2>&1; echo "25e6 rc $?"
for f in $OUT/keep_table*_s16.log $OUT/keep_25e6_s16.log; do echo "== $f"; grep -E "^(floor|tz|deep|ddp)|Error" $f | cut -c1-130; done
