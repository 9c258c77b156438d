# Fifteenth session: where the GPU-side gap goes once the host runs ahead (--lead-ms 10):
# kernel sums per kind, compute-stream idle and the tail after its last kernel; lead 0 for comparison.
# (Run with the first sleep calibration: the actual lead was about 3.6 ms, see lead_s15.sh.)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1 || echo "editable install failed"
cd benchmarks
mkdir -p $OUT/traces
timeout 150 torchrun --nproc_per_node 2 profile_gpu.py --systems floor,tz,tz-ce --bucket 1e6 --lead-ms 10 --trace-dir $OUT/traces > $OUT/profile_lead10_1e6_s15.log 2>&1; echo "rc $?"
timeout 150 torchrun --nproc_per_node 2 profile_gpu.py --systems floor,tz,tz-ce --bucket 1e8 --lead-ms 10 > $OUT/profile_lead10_1e8_s15.log 2>&1; echo "rc $?"
timeout 150 torchrun --nproc_per_node 2 profile_gpu.py --systems floor,tz,tz-ce --bucket 1e6 > $OUT/profile_lead0_1e6_s15.log 2>&1; echo "rc $?"
for f in $OUT/profile_*_s15.log; do echo "== $f"; grep -A4 "^bucket" $f; grep -i -m3 "error" $f; done
ls -la $OUT/traces
