# Fifteenth session: more environment knobs against the default, one machine: one hardware work
# queue (CUDA_DEVICE_MAX_CONNECTIONS=1, Megatron's setting) and NCCL's watchdog and error handling off.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1 || echo "editable install failed"
i=0
for v in default mc1 nowatch default; do
  i=$((i+1))
  case $v in
    mc1) E="CUDA_DEVICE_MAX_CONNECTIONS=1";;
    nowatch) E="TORCH_NCCL_ENABLE_MONITORING=0 TORCH_NCCL_ASYNC_ERROR_HANDLING=0";;
    *) E="";;
  esac
  (cd benchmarks && env $E timeout 135 torchrun --nproc_per_node 2 bench_overlap.py --systems floor,tz-fused,tz-ce --buckets 1e6,1e8 --steps 30 --out $OUT/env_${v}${i}_s15.json > $OUT/env_${v}${i}_s15.log 2>&1; echo "$v$i rc $?")
done
for f in $OUT/env_*_s15.log; do echo "== $f"; grep -E "^(floor|tz)" $f | cut -c1-100; done
