# Fifteenth session: the NCCL equivalence/send-buffer cases and the copy-engine cases on 2 and 4
# GPUs (nvidia-h200-x4), both transports.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1 || echo "editable install failed"
nvidia-smi topo -m | head -6
timeout 520 python3 -m pytest -v -s --durations=0 tests/test_nccl.py tests/test_copy_engine_gpu.py > $OUT/pytest_x4_s15.log 2>&1; echo "tests rc $?"
grep -E "PASSED|FAILED|ERROR|passed|failed|rel_err.*e[-+]0[0-2] " $OUT/pytest_x4_s15.log | tail -20
