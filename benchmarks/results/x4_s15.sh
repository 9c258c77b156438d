# Fifteenth session: the NVLink table on 4 x H200 (nvidia-h200-x4), 25e6 and 1e8.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > /dev/null 2>&1 || echo "site install failed"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1 || echo "editable install failed"
cd benchmarks
PYTHONPATH=/tmp/site timeout 240 torchrun --nproc_per_node 4 bench_overlap.py --systems floor,floor-sync,tz-fused,tz-ce,deepspeed,ddp --buckets 25e6,1e8 --steps 20 --out $OUT/x4_s15.json > $OUT/x4_s15.log 2>&1; echo "rc $?"
grep -E "^(floor|tz|deep|ddp|system|[0-9]+M)|Error" $OUT/x4_s15.log | cut -c1-140
