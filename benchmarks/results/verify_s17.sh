# Seventeenth session: the sixteenth session's last commit plus the new keep_grads_until_step
# equivalence test (tests/test_nccl.py) on 2 x H200: every GPU test file, then the full NVLink table.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > /dev/null 2>&1 || echo "site install failed"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1 || echo "editable install failed"
nvidia-smi --query-gpu=index,name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
timeout 420 python3 -m pytest -q -s -rfEsxX tests/ -p no:cacheprovider > $OUT/pytest_gpu_s17.log 2>&1; echo "pytest rc $?"
grep -E "passed|failed" $OUT/pytest_gpu_s17.log | tail -3; grep -E "^(FAILED|ERROR)" $OUT/pytest_gpu_s17.log | head
grep -E "bucket\(s\) kept" $OUT/pytest_gpu_s17.log | awk "{print \"rank\", \$2, \"kept\", \$6}" | sort | uniq -c
cd benchmarks
PYTHONPATH=/tmp/site timeout 150 torchrun --nproc_per_node 2 bench_overlap.py --systems floor,floor-sync,tz-fused,tz-ce,tz-ce-keep,deepspeed,ddp,fsdp2 --buckets 1e6,25e6,1e8 --steps 20 --out $OUT/full_s17.json > $OUT/full_s17.log 2>&1; echo "bench rc $?"
grep -E "^(floor|tz|deep|ddp|fsdp|system)|Error" $OUT/full_s17.log | cut -c1-130
