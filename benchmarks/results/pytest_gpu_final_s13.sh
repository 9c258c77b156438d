export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > /dev/null 2>&1 || echo "site install failed"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1 || echo "editable install failed"
PYTHONPATH=/tmp/site timeout 300 python3 -m pytest -q -s tests/test_nccl.py tests/test_copy_engine_gpu.py tests/test_race_gpu.py tests/test_host_syncs_gpu.py tests/test_overlap_gpu.py > $OUT/pytest_gpu_final_s13.log 2>&1; echo "tests rc $?"; grep -E "passed|failed" $OUT/pytest_gpu_final_s13.log | tail -2
grep -h "step" $OUT/pytest_gpu_final_s13.log | grep "rank 0" | head -16
