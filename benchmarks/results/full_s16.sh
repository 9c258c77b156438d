# Sixteenth session: the full NVLink table on the final code, tz-ce-keep beside the others.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > /dev/null 2>&1 || echo "site install failed"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1 || echo "editable install failed"
cd benchmarks
PYTHONPATH=/tmp/site timeout 420 torchrun --nproc_per_node 2 bench_overlap.py --systems floor,floor-sync,tz-fused,tz-ce,tz-ce-keep,deepspeed,ddp,fsdp2 --buckets 1e6,25e6,1e8 --steps 20 --out $OUT/full_s16.json > $OUT/full_s16.log 2>&1; echo "rc $?"
grep -E "^(floor|tz|deep|ddp|fsdp|system)|Error" $OUT/full_s16.log | cut -c1-130
