export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > /dev/null 2>&1 || echo "site install failed"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1 || echo "editable install failed"
cp benchmarks/results/switch_s14.py benchmarks/
for r in 1 2 3; do for v in default 2e-4; do
  if [ $v = default ]; then S=; else S=$v; fi
  (cd benchmarks && TZ_SWITCH=$S TZ_STEPS=$OUT/switch_${v}${r}_steps_s14.json PYTHONPATH=/tmp/site timeout 90 torchrun --nproc_per_node 2 switch_s14.py --systems floor,tz-fused,tz-ce --buckets 1e6,1e8 --steps 40 > $OUT/switch_${v}${r}_s14.log 2>&1; echo "$v$r rc $?")
done; done
rm benchmarks/switch_s14.py
for f in $OUT/switch_*_s14.log; do echo "== $f"; grep -E "^(floor|tz)" $f | cut -c1-60; done
