export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > /dev/null 2>&1 || echo "site install failed"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1 || echo "editable install failed"
export PYTHONPATH=/tmp/site
timeout 100 torchrun --nproc_per_node 2 benchmarks/bench_overlap.py --systems floor,collectives,tz-fused,tz-ce,ddp,fsdp2,deepspeed --buckets 1e6,25e6,1e8 --out $OUT/overlap_nvlink_s12.json > $OUT/overlap_nvlink_s12.log 2>&1; echo "table rc $?"
(cd benchmarks && timeout 100 torchrun --nproc_per_node 2 profile_gpu.py --systems floor,tz-ce,tz --bucket 25e6 > $OUT/profile_ce_s12.log 2>&1; echo "profile rc $?")
timeout 330 python3 -m pytest -q tests > $OUT/pytest_gpu_s12.log 2>&1; echo "tests rc $?"; tail -3 $OUT/pytest_gpu_s12.log
grep -A12 "^system" $OUT/overlap_nvlink_s12.log | grep -v Guessing
grep -A6 "^bucket" $OUT/profile_ce_s12.log
