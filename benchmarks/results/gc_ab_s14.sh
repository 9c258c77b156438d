export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > /dev/null 2>&1 || echo "site install failed"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1 || echo "editable install failed"
cp benchmarks/results/gc_s14.py benchmarks/
for r in 1 2; do for v in gc nogc; do
  if [ $v = nogc ]; then G=1; else G=0; fi
  (cd benchmarks && TZ_NOGC=$G PYTHONPATH=/tmp/site timeout 130 torchrun --nproc_per_node 2 gc_s14.py --systems floor,tz-fused,tz-ce --buckets 1e6,1e8 --steps 40 --out $OUT/gc_${v}${r}_s14.json > $OUT/gc_${v}${r}_s14.log 2>&1; echo "$v$r rc $?")
done; done
rm benchmarks/gc_s14.py
for f in $OUT/gc_*_s14.log; do echo "== $f"; grep -E "^(floor|tz)" $f | cut -c1-100; done
