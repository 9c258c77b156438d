export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > /dev/null 2>&1 || echo "site install failed"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1 || echo "editable install failed"
python3 -m pip install -q --no-deps --no-build-isolation --target /tmp/old .whl/old > /dev/null 2>&1 || echo "old install failed"
PYTHONPATH=/tmp/site timeout 250 python3 -m pytest -q tests/test_nccl.py tests/test_copy_engine_gpu.py tests/test_race_gpu.py tests/test_host_syncs_gpu.py tests/test_overlap_gpu.py > $OUT/pytest_gpu_s13.log 2>&1; echo "tests rc $?"; tail -2 $OUT/pytest_gpu_s13.log
for v in new old; do
  if [ $v = old ]; then P=/tmp/old:/tmp/site; else P=/tmp/site; fi
  (cd benchmarks && PYTHONPATH=$P timeout 130 torchrun --nproc_per_node 2 bench_overlap.py --systems floor,tz-fused,tz-ce --buckets 25e6,1e8 --out $OUT/taper_${v}${R}_s13.json > $OUT/taper_${v}${R}_s13.log 2>&1; echo "$v rc $?")
done
for f in $OUT/taper_*_s13.log; do echo "== $f"; grep -E "^(floor|tz)" $f | cut -c1-150; done
