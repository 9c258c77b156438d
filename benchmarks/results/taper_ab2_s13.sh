export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1 || echo "editable install failed"
python3 -m pip install -q --no-deps --no-build-isolation --upgrade --target /tmp/old .whl/old > /dev/null 2>&1 || echo "old install failed"
for r in 2 3; do for v in new old; do
  if [ $v = old ]; then P=/tmp/old:/tmp/site; else P=/tmp/site; fi
  (cd benchmarks && PYTHONPATH=$P timeout 100 torchrun --nproc_per_node 2 bench_overlap.py --systems floor,tz-fused,tz-ce --buckets 1e8 --steps 25 > $OUT/taper_${v}${r}_s13.log 2>&1; echo "$v$r rc $?")
done; done
for f in $OUT/taper_*_s13.log; do echo "== $f"; grep -E "^(floor|tz)" $f | cut -c1-100; done
