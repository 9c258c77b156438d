# Fifteenth session: bf16 AdamW's update error on 1 / 2 / 4 GPUs (bf16_worlds_s15.py), then the
# 4-GPU cases of test_nccl.py with the bf16 AdamW tolerance at 6e-2.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1 || echo "editable install failed"
timeout 150 python3 benchmarks/results/bf16_worlds_s15.py > $OUT/bf16_worlds_s15.log 2>&1; echo "bf16 rc $?"; grep -v Warning $OUT/bf16_worlds_s15.log | grep "^[124] "
timeout 330 python3 -m pytest -v -s tests/test_nccl.py -k "4]" > $OUT/pytest_x4b_s15.log 2>&1; echo "tests rc $?"
grep -E "PASSED|FAILED|passed|failed|adamw-bf16" $OUT/pytest_x4b_s15.log | tail -12
