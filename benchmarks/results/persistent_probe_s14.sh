export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > /dev/null 2>&1 || echo "site install failed"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1 || echo "editable install failed"
PYTHONPATH=/tmp/site timeout 200 torchrun --nproc_per_node 2 benchmarks/results/persistent_probe_s14.py > $OUT/persistent_probe_s14.log 2>&1; echo "rc $?"
grep -E "^(==|   )" $OUT/persistent_probe_s14.log | head -80
