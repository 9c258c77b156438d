export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > /dev/null 2>&1 || echo "site install failed"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1 || echo "editable install failed"
for r in ${ROUNDS:-1}; do for v in thread inline; do
  if [ $v = inline ]; then I=1; else I=0; fi
  (cd benchmarks && TZ_INLINE=$I PYTHONPATH=/tmp/site timeout 140 torchrun --nproc_per_node 2 bench_overlap.py --systems floor,tz-fused,tz-ce --buckets ${BUCKETS:-1e6,25e6,1e8} --out $OUT/inline_${v}${r}_s14.json > $OUT/inline_${v}${r}_s14.log 2>&1; echo "$v$r rc $?")
done; done
for f in $OUT/inline_*_s14.log; do echo "== $f"; grep -E "^(floor|tz)" $f | cut -c1-100; done
