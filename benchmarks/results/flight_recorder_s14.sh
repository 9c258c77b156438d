export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1 || echo "editable install failed"
python3 -c "import torch; print(torch.__version__)"; env | grep -i TORCH_NCCL || echo "no TORCH_NCCL env set"
cd benchmarks
for r in 1 2; do for v in default fr0; do
  if [ $v = fr0 ]; then E="TORCH_NCCL_TRACE_BUFFER_SIZE=0"; else E="TZ_NOTHING=1"; fi
  env $E timeout 100 torchrun --nproc_per_node 2 profile_host.py --bucket 1e6 > $OUT/fr_${v}${r}_s14.log 2>&1; echo "$v$r rc $?"
done; done
for f in $OUT/fr_*_s14.log; do echo "== $f"; grep -E "^(bucket|  )" $f; done
