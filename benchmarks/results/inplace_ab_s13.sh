export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > /dev/null 2>&1 || echo "site install failed"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1 || echo "editable install failed"
python3 -m pip install -q --no-deps --no-build-isolation --target /tmp/old .whl/old > /dev/null 2>&1 || echo "old install failed"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
PYTHONPATH=/tmp/site timeout 240 python3 -m pytest -q -x -s tests/test_copy_engine_gpu.py tests/test_nccl.py > $OUT/pytest_ce_s13.log 2>&1; echo "tests rc $?"; grep -E "passed|failed|error" $OUT/pytest_ce_s13.log | tail -3
for v in new old; do
  if [ $v = old ]; then P=/tmp/old:/tmp/site; else P=/tmp/site; fi
  (cd benchmarks && PYTHONPATH=$P timeout 130 torchrun --nproc_per_node 2 bench_overlap.py --systems floor,tz-fused,tz-ce --buckets 1e6,25e6 --out $OUT/ab_${v}1_s13.json > $OUT/ab_${v}1_s13.log 2>&1; echo "$v rc $?")
done
grep -h "rel_err" $OUT/pytest_ce_s13.log | grep "step" | head -12
for f in $OUT/ab_*_s13.log; do echo "== $f"; grep -E "^(floor|tz)" $f | cut -c1-150; done
