export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1 || echo "editable install failed"
timeout 400 python3 -m pytest -q tests/test_nccl.py tests/test_copy_engine_gpu.py tests/test_overlap_gpu.py > $OUT/pytest_ce_review_s14.log 2>&1; echo "tests rc $?"; tail -3 $OUT/pytest_ce_review_s14.log
