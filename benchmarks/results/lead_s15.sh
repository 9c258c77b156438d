# Fifteenth session: does the host's lead over the GPU decide the NVLink gap? The benchmark syncs
# the host at every step's start; --lead-ms L lets the host run L ms ahead (a GPU sleep before
# the timed window). Same machine, lead 0 / 10 / 20 / 0 ms.
# (Run with the first calibration, which timed the sleep kernel's first launch: the actual leads
# were about 3.6 and 7 ms; the calibration now launches it once first.)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1 || echo "editable install failed"
i=0
for L in 0 10 20 0; do
  i=$((i+1))
  (cd benchmarks && timeout 135 torchrun --nproc_per_node 2 bench_overlap.py --systems floor,tz-fused,tz-ce --buckets 1e6,1e8 --steps 30 --lead-ms $L --out $OUT/lead_${L}ms_${i}_s15.json > $OUT/lead_${L}ms_${i}_s15.log 2>&1; echo "lead $L ($i) rc $?")
done
for f in $OUT/lead_*_s15.log; do echo "== $f"; grep -E "^(floor|tz)|Error|error" $f | cut -c1-100; done
