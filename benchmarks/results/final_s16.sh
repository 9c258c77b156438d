# Sixteenth session, final code: every test file on 2 x H200 (the copy-engine cases now include
# keep_grads_until_step at 79,000 and 1e6, side.weight's kept slice falling back when it has no gradient).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1 || echo "editable install failed"
timeout 400 python3 -m pytest -q -s -rfEsxX tests/ -p no:cacheprovider > $OUT/pytest_gpu_final_s16.log 2>&1; echo "pytest rc $?"
grep -E "passed|failed" $OUT/pytest_gpu_final_s16.log | tail -2; grep -E "^(FAILED|ERROR)" $OUT/pytest_gpu_final_s16.log | head
grep -E "keep=True step" $OUT/pytest_gpu_final_s16.log | head -8
