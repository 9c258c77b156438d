# Fifteenth session: CUDA_DEVICE_MAX_CONNECTIONS (hardware work queues; default 8) against the
# default, ABBA in one machine: floor, tz-fused, tz-ce at 1e6 and 1e8.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1 || echo "editable install failed"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
i=0
for v in default mc32 mc32 default; do
  i=$((i+1))
  if [ $v = mc32 ]; then MC="CUDA_DEVICE_MAX_CONNECTIONS=32"; else MC=""; fi
  (cd benchmarks && env $MC timeout 135 torchrun --nproc_per_node 2 bench_overlap.py --systems floor,tz-fused,tz-ce --buckets 1e6,1e8 --steps 30 --out $OUT/maxconn_${v}${i}_s15.json > $OUT/maxconn_${v}${i}_s15.log 2>&1; echo "$v$i rc $?")
done
for f in $OUT/maxconn_*_s15.log; do echo "== $f"; grep -E "^(floor|tz)" $f | cut -c1-100; done
