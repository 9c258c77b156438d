export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > /dev/null 2>&1 || echo "site install failed"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1 || echo "editable install failed"
PYTHONPATH=/tmp/site timeout 500 python3 -m pytest -q tests > $OUT/pytest_gpu_whole_s13.log 2>&1; echo "tests rc $?"; grep -E "passed|failed|FAILED" $OUT/pytest_gpu_whole_s13.log | tail -5
