export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1 || echo "editable install failed"
timeout 240 python3 -m pytest -q -s tests/test_overlap_gpu.py tests/test_race_gpu.py tests/test_host_syncs_gpu.py > $OUT/pytest_backpressure_s12.log 2>&1; echo "tests rc $?"; tail -1 $OUT/pytest_backpressure_s12.log
cd benchmarks
for b in 1e6 25e6; do
  timeout 80 torchrun --nproc_per_node 2 profile_host.py --bucket $b --transport collective > $OUT/host_collective_${b}_s12.log 2>&1; echo "collective $b rc $?"
done
for f in $OUT/host_*_s12.log; do grep -vE "Guessing|UserWarning|return func|^\[rank|^W1|^\*\*\*|OMP_NUM" $f; done
