# Sixteenth session: the fifteenth session's last commit (a2c19c6: one sleep calibration shared by
# bench_overlap.py, profile_gpu.py and tests/test_overlap_gpu.py) on 2 x H200: every GPU test file,
# then the benchmark and the profiler with the host 10 ms ahead (both use the shared calibration).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1 || echo "editable install failed"
nvidia-smi --query-gpu=index,name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
timeout 300 python3 -m pytest -q -s -rfEsxX tests/ -p no:cacheprovider > $OUT/pytest_gpu_s16.log 2>&1; echo "pytest rc $?"
cd benchmarks
timeout 150 torchrun --nproc_per_node 2 bench_overlap.py --systems floor,floor-sync,tz-fused,tz-ce,ddp --buckets 1e6,25e6,1e8 --steps 30 --lead-ms 10 --out $OUT/lead10_s16.json > $OUT/lead10_s16.log 2>&1; echo "bench rc $?"
timeout 100 torchrun --nproc_per_node 2 profile_gpu.py --systems floor,tz-ce --bucket 1e6 --lead-ms 10 > $OUT/profile_lead10_s16.log 2>&1; echo "profile rc $?"
grep -E "passed|failed" $OUT/pytest_gpu_s16.log | tail -3; grep -E "^(FAILED|ERROR)" $OUT/pytest_gpu_s16.log | head
grep -E "^(floor|tz|ddp)|Error" $OUT/lead10_s16.log | cut -c1-130
grep -A4 "^bucket" $OUT/profile_lead10_s16.log; grep -i -m3 "error" $OUT/profile_lead10_s16.log
