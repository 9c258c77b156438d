export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1 || echo "editable install failed"
cd benchmarks
for t in collective copy_engine; do
  timeout 100 torchrun --nproc_per_node 2 profile_host.py --bucket 1e6 --transport $t > $OUT/host_${t}_1e6_s14.log 2>&1; echo "$t rc $?"
  timeout 100 torchrun --nproc_per_node 2 profile_host.py --bucket 1e6 --transport $t --cprofile > $OUT/cprof_${t}_1e6_s14.log 2>&1; echo "$t cprof rc $?"
done
for f in $OUT/host_*_s14.log; do echo "== $f"; grep -E "^(no sync|bucket|  )" $f; done
