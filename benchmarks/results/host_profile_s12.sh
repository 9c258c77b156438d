export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1 || echo "editable install failed"
cd benchmarks
for b in 1e6 25e6; do for t in collective copy_engine; do
  timeout 100 torchrun --nproc_per_node 2 profile_host.py --bucket $b --transport $t > $OUT/host_${t}_${b}_s12.log 2>&1; echo "$t $b rc $?"
done; done
for f in $OUT/host_*_s12.log; do grep -vE "Guessing|UserWarning|return func|^\[rank|^W1|^\*\*\*|OMP_NUM" $f; done
